#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "record/step_stats.h"

namespace tb {

// When to stop timing. Warm-up is not a fixed count: the MSER-5 rule finds where the
// step times become stationary, then sampling goes on until the confidence interval of
// the mean is narrow enough or the budget runs out.
struct SteadyStateOptions {
  double target_rel_ci = 0.01;  // half-width of the CI relative to the mean
  double confidence = 0.95;
  double budget_s = 30;      // wall-clock budget for the timed loop
  int64_t min_samples = 10;  // stationary samples needed before the CI is trusted
  int64_t max_steps = 0;     // 0: no limit
  int64_t fixed_steps = 0;   // >0: run exactly this many steps, no early stop
  // Seconds of stationary steps needed before the CI is trusted (capped at half the budget).
  // A short window can sit wholly inside a slow spell of a shared machine (steal time,
  // another tenant's burst) and then look stationary and precise while it is 10-40% off;
  // README.md ("What a run measures") gives the measurement that set the default.
  double min_time_s = 0.5;
};

// MSER-5 truncation point (in samples, a multiple of 5) for a series, searched over the
// first half of the batch means; a result at the half-way limit means "not stationary yet".
// The callers treat a truncation point at or beyond half the samples as not stationary.
int64_t mser5_truncation(const std::vector<double>& x);

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
