#pragma once
// How well the accelerator model predicts reality: this machine's measured step times
// against the model's prediction from the same machine's measured description.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/runs.h"

namespace tb::sim {

struct ValidationPoint {
  std::string config, family, platform;
  double predicted_s = 0, measured_s = 0;
  std::string bound;  // the larger share of the predicted step: compute or memory
  double error() const { return std::abs(predicted_s - measured_s) / measured_s; }
};

struct ErrorStats {
  size_t n = 0;
  double median = 0, p90 = 0;  // of |predicted - measured| / measured
  double median_ratio = 0;     // of predicted / measured: below 1, the model is optimistic
};
// Linear-interpolated percentiles of the errors (analysis/analysis.h percentile).
ErrorStats error_stats(const std::vector<ValidationPoint>& points);

struct Validation {
  std::string platform;
  std::vector<ValidationPoint> points;
  ErrorStats all;
  std::map<std::string, ErrorStats> per_family;
  std::vector<std::string> skipped;  // config: why
};

// One validation per platform of the run set with a description (the stored one, or
// `description` for every platform when given). Ok runs only; a run whose config the cost
// model cannot price is skipped with the reason. CPU runs on fewer threads than the
// description's cores get that share of its peak.
std::vector<Validation> validate(const RunSet& runs,
                                 const std::optional<PlatformDescription>& description = {});

nlohmann::json to_json(const Validation& v);
std::string format_validation(const std::vector<Validation>& v);

}  // namespace tb::sim
