#include "runner/steady_state.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <numeric>

namespace tb {
namespace {

double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  const double pos = q * (s.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - lo) * (s[hi] - s[lo]);
}

double t_quantile(double confidence, int64_t dof) {
  boost::math::students_t dist(double(std::max<int64_t>(dof, 1)));
  return boost::math::quantile(dist, 0.5 + confidence / 2);
}

}  // namespace

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

Interval mean_interval(const std::vector<double>& x, double confidence) {
  Interval ci;
  const int64_t n = int64_t(x.size());
  if (n == 0) return ci;
  std::vector<double> v;
  if (n >= 32) {
    const int64_t b = int64_t(std::sqrt(double(n))), m = n / b, skip = n - b * m;
    for (int64_t i = 0; i < b; ++i)
      v.push_back(std::accumulate(x.begin() + skip + i * m, x.begin() + skip + (i + 1) * m, 0.0) /
                  m);
  } else {
    v = x;
  }
  const int64_t k = int64_t(v.size());
  ci.batches = n >= 32 ? k : 1;
  ci.mean = std::accumulate(v.begin(), v.end(), 0.0) / k;
  if (k < 2) {
    ci.half_width = INFINITY;
    return ci;
  }
  double ss = 0;
  for (double e : v) ss += (e - ci.mean) * (e - ci.mean);
  const double sd = std::sqrt(ss / (k - 1));
  ci.half_width = t_quantile(confidence, k - 1) * sd / std::sqrt(double(k));
  return ci;
}

StepStats summarize(const std::vector<double>& times, int64_t warmup, double confidence) {
  StepStats s;
  s.steps = int64_t(times.size());
  s.warmup = std::min<int64_t>(warmup, s.steps);
  std::vector<double> x(times.begin() + s.warmup, times.end());
  s.samples = int64_t(x.size());
  if (x.empty()) return s;
  s.ci = mean_interval(x, confidence);
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / x.size();
  double ss = 0;
  for (double e : x) ss += (e - s.mean) * (e - s.mean);
  s.stddev = x.size() > 1 ? std::sqrt(ss / (x.size() - 1)) : 0;
  s.cv = s.mean > 0 ? s.stddev / s.mean : 0;
  std::sort(x.begin(), x.end());
  s.min = x.front(), s.max = x.back();
  s.median = quantile_sorted(x, 0.5);
  s.p5 = quantile_sorted(x, 0.05);
  s.p95 = quantile_sorted(x, 0.95);
  return s;
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
      if (ci.relative() <= opt_.target_rel_ci && std::fabs(m1 - m2) <= 2 * ci.half_width)
        return finish("converged");
    }
  }
  if (elapsed_s >= opt_.budget_s && n >= 2) return finish("budget");
  if (opt_.max_steps > 0 && n >= opt_.max_steps) return finish("max-steps");
  return false;
}

}  // namespace tb
