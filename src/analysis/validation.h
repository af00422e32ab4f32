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
  std::string bound;  // the largest share of the predicted step: compute, memory or overhead
  // Published rows (analysis/published.h): the simulated format, where the figure comes from,
  // and the examples per step that turn step times into throughputs.
  std::string format, source;
  int64_t batch = 0;
  std::string unit;  // of batch / step time: examples/s or tokens/s
  double error() const { return std::abs(predicted_s - measured_s) / measured_s; }
  // The measurement's own spread between its fresh processes (max/min of their means, less 1;
  // NaN where it rests on one process or is a published figure), and whether its processes
  // disagree beyond their own CIs (record/repetitions.h): an error below the spread is not
  // resolved by the run.
  double spread = std::nan("");
  bool unstable = false;
  // Per phase (forward, backward, optimizer), where the run measured its phases
  // (timing.phases_s) and the model splits its step: the two times (simulate's phase_total_s).
  std::map<std::string, std::pair<double, double>> phases;  // phase -> {predicted, measured}
};

struct ErrorStats {
  size_t n = 0;
  double median = 0, p90 = 0;  // of |predicted - measured| / measured
  double median_ratio = 0;     // of predicted / measured: below 1, the model is optimistic
  // Of the points measured in two or more processes: how many, and their median spread.
  size_t with_spread = 0;
  double median_spread = std::nan("");
  size_t unstable = 0;
  // Per phase: the median of predicted / measured over the points that have it, and how many.
  std::map<std::string, std::pair<double, size_t>> phase_ratio;
};
// Linear-interpolated percentiles of the errors (analysis/analysis.h percentile).
ErrorStats error_stats(const std::vector<ValidationPoint>& points);

struct Validation {
  std::string platform;     // where the runs were measured (the store's platform row)
  std::string description;  // the description the predictions used (--platform, or the row's)
  // What the prediction rests on: the pure roofline, or the roofline with the
  // description's efficiency (which trainbench platform measures with micro-benchmarks,
  // so the runs being predicted play no part in it).
  std::string model;
  std::vector<ValidationPoint> points;
  ErrorStats all;
  std::map<std::string, ErrorStats> per_family;
  std::vector<std::string> skipped;  // config: why
  // When the description was measured (its `measured_at`, a measured host's) and the span of
  // the predicted runs (UTC, ISO 8601; empty where unknown), and how many hours lie between
  // the two (0 when the description was measured among the runs; NaN where unknown). A shared
  // host's speed drifts over hours, so a prediction from a description of another hour carries
  // that drift in its error.
  std::string description_measured_at, runs_from, runs_to;
  double hours_apart = std::nan("");
};
// Hours between an instant and a span of time, all "YYYY-MM-DDTHH:MM:SSZ": 0 inside the span;
// NaN where any of them does not parse.
double hours_apart(const std::string& at, const std::string& from, const std::string& to);

// One validation per platform of the run set with a description (the stored one, or
// `description` for every platform when given). Ok runs only; a run whose config the cost
// model cannot price is skipped with the reason. CPU runs on fewer threads than the
// description's cores get that share of its peak.
std::vector<Validation> validate(const RunSet& runs,
                                 const std::optional<PlatformDescription>& description = {});

nlohmann::json to_json(const Validation& v);
std::string format_validation(const std::vector<Validation>& v);

}  // namespace tb::sim
