#include "record/step_stats.h"

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

}  // namespace tb
