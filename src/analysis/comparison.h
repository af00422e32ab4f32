#pragma once
// Platform vs platform, stack vs stack, or one value of a hyperparameter (dtype, threads,
// ...) vs another: speedups on matched configs (ParaDnn section 5 and 6, Figs. 8-10).
#include <map>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/heatmap.h"
#include "analysis/runs.h"

namespace tb {

struct ComparisonView {
  std::string axis;  // "platform", "stack", or a hyperparameter name
  std::string a, b;  // the two sides; speedup = how much faster b is than a
  std::string metric;
  Comparison stats;  // over all matched configs
  // One point per matched config, value = speedup, params and run of side A (the axis
  // parameter itself removed when the axis is a hyperparameter).
  std::vector<Point> points;
  std::map<std::string, Comparison> by_family;
  std::map<std::string, Regression> regression_by_family;  // of the speedup, where enough points
  std::map<std::string, HeatMap> heat_by_family;  // speedup over its two highest-weight parameters
  // Matched configs where the side that wins differs from the overall winner, the
  // clearest first.
  std::vector<Speedup> flips;
  // Matched configs (named by A's config) where either side's run is unstable.
  std::vector<std::string> unstable;
};

// Values the axis takes among the runs, in order of first appearance.
std::vector<std::string> axis_values(const RunSet& runs, const std::string& axis);

// Compares side `b` with side `a` on the metric (a rate, or a time whose inverse is
// used). Only ok runs present on both sides count. Throws UsageError for an axis value
// that no run has.
ComparisonView compare_runs(const RunSet& runs, const std::string& axis, const std::string& a,
                            const std::string& b, const std::string& metric = "examples_per_s",
                            const std::string& family = "");

}  // namespace tb
