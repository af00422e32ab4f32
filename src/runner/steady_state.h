#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

// When to stop timing. Warm-up is not a fixed count: the MSER-5 rule finds where the
// step times become stationary, then sampling goes on until the confidence interval of
// the mean is narrow enough or the budget runs out.
struct SteadyStateOptions {
  double target_rel_ci = 0.01;  // half-width of the CI relative to the mean
  double confidence = 0.95;
  double budget_s = 30;       // wall-clock budget for the timed loop
  int64_t min_samples = 10;   // stationary samples needed before the CI is trusted
  int64_t max_steps = 0;      // 0: no limit
  int64_t fixed_steps = 0;    // >0: run exactly this many steps, no early stop
};

struct Interval {
  double mean = 0, half_width = 0;
  int64_t batches = 0;  // batch means used (1 = raw samples)
  double relative() const { return mean > 0 ? half_width / mean : 0; }
};

// MSER-5 truncation point (in samples, a multiple of 5) for a series, searched over the
// first half of the batch means; a result at the half-way limit means "not stationary yet".
// The callers treat a truncation point at or beyond half the samples as not stationary.
int64_t mser5_truncation(const std::vector<double>& x);

// Confidence interval of the mean of x: non-overlapping batch means (sqrt(n) batches)
// once n >= 32, so autocorrelated step times do not make the interval look too narrow;
// Student's t on the raw samples below that.
Interval mean_interval(const std::vector<double>& x, double confidence);

struct StepStats {
  int64_t steps = 0;    // all timed steps, warm-up included
  int64_t warmup = 0;   // steps dropped as warm-up
  int64_t samples = 0;  // steps the statistics below describe
  double mean = 0, median = 0, p5 = 0, p95 = 0, stddev = 0, cv = 0, min = 0, max = 0;
  Interval ci;
  bool stationary = false;
  std::string end_reason;  // converged, budget, max-steps, fixed-steps
  double wall_s = 0;       // wall time of the whole timed loop
};

// Statistics of the steps after the warm-up.
StepStats summarize(const std::vector<double>& times, int64_t warmup, double confidence);

// Decides, after each new step time, whether to stop (and fills `out` when it does).
class SteadyStateMonitor {
 public:
  explicit SteadyStateMonitor(SteadyStateOptions o) : opt_(o) {}
  // Returns true when the loop should stop.
  bool add(double step_seconds, double elapsed_s);
  const std::vector<double>& times() const { return times_; }
  StepStats result() const { return stats_; }

 private:
  bool finish(const std::string& reason);
  SteadyStateOptions opt_;
  std::vector<double> times_;
  int64_t next_check_ = 0;
  double elapsed_ = 0;
  StepStats stats_;
};

}  // namespace tb
