#pragma once
// The statistics of a run's step times, as results keep them; the stopping rule that decides
// when to stop timing is the runner's (runner/steady_state.h).
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

struct Interval {
  double mean = 0, half_width = 0;
  int64_t batches = 0;  // batch means used (1 = raw samples)
  double relative() const { return mean > 0 ? half_width / mean : 0; }
};

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

}  // namespace tb
