#pragma once
// What `trainbench memory` measures: the bytes alive during one steady-state training
// step, by owner, from the counting allocator (runner/memory_tracker.h).
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"

namespace tb {

// TBD's categories (Fig. 8; "dynamic" is the optimizer state), plus the temporaries that
// outlive one operator (activation gradients in backward, forward intermediates nobody
// keeps) and "other": allocations alive before the step that no owner claims.
enum MemoryCategory : int {
  kWeights = 0,
  kGradients,
  kOptimizerState,
  kFeatureMaps,
  kWorkspace,
  kTemporaries,
  kInputs,
  kOtherMemory,
  kMemoryCategories
};
const char* category_name(int c);  // weights, gradients, optimizer_state, feature_maps, ...

struct MemoryPoint {
  double t_us = 0;  // since the step started
  std::string phase;
  std::array<double, kMemoryCategories> bytes{};
  double total() const;
};

struct MemoryBreakdown {
  std::string config;
  int64_t batch = 0;
  int64_t params = 0, dtype_bytes = 0;
  // The most bytes of each category alive at once during the step, and each category at
  // the moment the total peaked.
  std::array<double, kMemoryCategories> peak{}, at_peak{};
  double peak_total = 0;
  std::string peak_phase;
  int64_t allocations = 0;  // made during the step
  // What the owners hold, counted from the tensors themselves: the exactness references.
  double optimizer_held_bytes = 0;
  MemoryEstimate estimate;                 // the cost model's
  std::vector<MemoryPoint> timeline;       // at most a few hundred points, the peak among them
  double estimate_of(int category) const;  // the estimate matched to a category, or -1
};

// A line fitted to y over x (least squares), with its coefficient of determination.
struct LinearFit {
  double slope = 0, intercept = 0, r2 = 0;
};
LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

// `trainbench memory --batch ...`: one breakdown per batch size and what fits a budget.
struct MemorySweep {
  std::vector<MemoryBreakdown> batches;
  std::optional<double> budget;
  LinearFit feature_maps_fit, total_fit;         // bytes over batch size
  std::optional<int64_t> largest_measured_fit;   // the largest measured batch within budget
  std::optional<int64_t> largest_predicted_fit;  // from total_fit
};
MemorySweep summarize(std::vector<MemoryBreakdown> batches, std::optional<double> budget);

nlohmann::json to_json(const MemoryBreakdown& m, bool with_timeline);
nlohmann::json to_json(const MemorySweep& s, bool with_timeline);

}  // namespace tb
