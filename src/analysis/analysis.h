#pragma once
// Analyses of a set of runs (ParaDnn sections 2.3, 4, 5, 6), as library functions over
// plain rows so they serve the CLI, the report and tests alike.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tb {

struct Run;

// A hyperparameter's value as a number, when it is one (finite, the whole text parsed).
std::optional<double> param_number(const std::map<std::string, std::string>& params,
                                   const std::string& key);

// A run (or a matched pair of runs) as a chart sees it: its hyperparameters as text, its
// outcome, and the value shown (absent unless ok).
struct Point {
  std::string config, family, status, error;
  std::map<std::string, std::string> params;
  std::optional<double> value;
  const Run* run = nullptr;  // the run behind it (side A of a comparison)
  // The value rests on a run whose repetitions disagree (either side of a comparison).
  bool unstable = false;
};

// One run as the regression sees it: its hyperparameters (numbers) and a metric value.
struct Sample {
  std::string config;
  std::map<std::string, double> params;
  double value = 0;
};

// Sensitivity by linear regression: standardized inputs (log2 first for axes that span a
// geometric range), least squares (Eigen), one signed weight per hyperparameter, R^2.
struct Regression {
  std::vector<std::string> terms;  // hyperparameters, then "a*b" second-order terms
  std::vector<double> weights;     // standardized: change in metric per standard deviation
  std::vector<bool> log2_scaled;   // per first-order term
  double intercept = 0, r2 = 0;
  size_t samples = 0;
};
// Throws std::invalid_argument when there are fewer samples than terms.
Regression sensitivity(const std::vector<Sample>& samples, const std::vector<std::string>& params,
                       bool second_order = false);
// Whether an axis is treated as geometric: all values positive, max/min >= 8.
bool geometric_axis(const std::vector<double>& values);
// The samples of the points that have a value and numbers for every one of `params`.
std::vector<Sample> samples_of(const std::vector<Point>& points,
                               const std::vector<std::string>& params);
// Parameters ordered by absolute weight, largest first (first-order terms only).
std::vector<std::string> ranked_params(const Regression& r);

// Box-plot statistics with ParaDnn's percentiles (2, 9, 50, 91, 98); values outside the
// 2..98 whiskers are outliers. Percentiles interpolate linearly between order statistics.
struct BoxStats {
  double p2 = 0, p9 = 0, p50 = 0, p91 = 0, p98 = 0;
  std::vector<double> outliers;
  size_t n = 0;
};
BoxStats box_stats(std::vector<double> values);
double percentile(std::vector<double> values, double p);  // p in [0, 100]

// Speedups of B over A (metric_b / metric_a for rates) on configs present on both sides.
struct Speedup {
  std::string config;
  // Each side's value; compare_runs puts a time back as a time (speedup = a / b then).
  double a = 0, b = 0, speedup = 0;
};
struct Comparison {
  std::vector<Speedup> matched;
  size_t only_a = 0, only_b = 0;
  double geomean = 0;
  double share_b_faster = 0;  // fraction of matched configs with speedup > 1
};
Comparison compare(const std::map<std::string, double>& a, const std::map<std::string, double>& b);

// Amdahl's law fitted to throughput over worker counts: speedup(n) = 1 / (s + (1 - s) / n);
// returns the non-parallel fraction s (least squares on 1/speedup = s + (1-s)/n), unclamped:
// outside [0, 1] the law does not describe the series.
double amdahl_serial_fraction(const std::map<int, double>& throughput_by_workers);

}  // namespace tb
