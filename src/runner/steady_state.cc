#include "runner/steady_state.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tb {

int64_t mser5_truncation(const std::vector<double>& x) {
  const int64_t k = int64_t(x.size()) / 5;
  if (k < 2) return 0;
  std::vector<double> z(k);
  for (int64_t j = 0; j < k; ++j)
    z[j] = std::accumulate(x.begin() + 5 * j, x.begin() + 5 * j + 5, 0.0) / 5;
  // Suffix sums give every candidate's mean and variance in O(k).
  std::vector<double> s1(k + 1, 0), s2(k + 1, 0);
  for (int64_t j = k - 1; j >= 0; --j) s1[j] = s1[j + 1] + z[j], s2[j] = s2[j + 1] + z[j] * z[j];
  // Standard MSER practice: only the first half is searched, so a short, by chance quiet
  // tail cannot win; a minimum at the half-way limit means "not stationary yet".
  int64_t best = 0;
  double best_value = INFINITY;
  for (int64_t d = 0; d <= k / 2; ++d) {
    const double n = double(k - d), mean = s1[d] / n;
    const double value = std::max(0.0, s2[d] - n * mean * mean) / (n * n);
    if (value < best_value) best_value = value, best = d;
  }
  return 5 * best;
}

bool SteadyStateMonitor::finish(const std::string& reason) {
  // The first step always pays for lazy allocation and one-time set-up.
  int64_t warmup = std::max<int64_t>(1, mser5_truncation(times_));
  const int64_t n = int64_t(times_.size());
  // Too few steps to tell: MSER needs batches to compare, and a CI needs samples.
  const bool stationary = warmup < 5 * ((n / 5) / 2) && n >= 10 && n - warmup >= opt_.min_samples;
  if (!stationary || n - warmup < 1) warmup = std::min<int64_t>(std::max<int64_t>(1, n / 2), n - 1);
  stats_ = summarize(times_, std::max<int64_t>(warmup, 0), opt_.confidence);
  stats_.stationary = stationary;
  stats_.end_reason = reason;
  stats_.wall_s = elapsed_;
  return true;
}

bool SteadyStateMonitor::add(double step_seconds, double elapsed_s) {
  times_.push_back(step_seconds);
  elapsed_ = elapsed_s;
  const int64_t n = int64_t(times_.size());
  if (opt_.fixed_steps > 0) return n >= opt_.fixed_steps ? finish("fixed-steps") : false;
  if (n >= std::max<int64_t>(next_check_, opt_.min_samples + 1)) {
    // Checks at geometrically spaced counts keep the analysis O(n) overall.
    next_check_ = std::max<int64_t>(n + 1, int64_t(n * 1.1));
    const int64_t warmup = std::max<int64_t>(1, mser5_truncation(times_));
    if (warmup < 5 * ((n / 5) / 2) && n - warmup >= opt_.min_samples) {
      std::vector<double> tail(times_.begin() + warmup, times_.end());
      const Interval ci = mean_interval(tail, opt_.confidence);
      // A drift the interval would hide: the two halves of the sample must agree about
      // as well as the interval says (|m1 - m2| has twice the standard error of the mean).
      const size_t h = tail.size() / 2;
      const double m1 = std::accumulate(tail.begin(), tail.begin() + h, 0.0) / h;
      const double m2 = std::accumulate(tail.begin() + h, tail.end(), 0.0) / (tail.size() - h);
      const double window_s = m1 * double(h) + m2 * double(tail.size() - h);
      const double min_time_s = std::min(opt_.min_time_s, opt_.budget_s / 2);
      if (ci.relative() <= opt_.target_rel_ci && std::fabs(m1 - m2) <= 2 * ci.half_width &&
          window_s >= min_time_s)
        return finish("converged");
    }
  }
  if (elapsed_s >= opt_.budget_s && n >= 2) return finish("budget");
  if (opt_.max_steps > 0 && n >= opt_.max_steps) return finish("max-steps");
  return false;
}

}  // namespace tb
