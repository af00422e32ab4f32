#include "analysis/convergence_test.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <numeric>

namespace tb {
namespace {

struct Moments {
  double n = 0, mean = 0, var = 0;  // var: the unbiased sample variance
};

Moments moments(const std::vector<double>& x) {
  Moments m;
  m.n = double(x.size());
  m.mean = std::accumulate(x.begin(), x.end(), 0.0) / m.n;
  for (double v : x) m.var += (v - m.mean) * (v - m.mean);
  m.var /= m.n - 1;
  return m;
}

double t_quantile(double p, double dof) {
  return boost::math::quantile(boost::math::students_t(std::max(dof, 1.0)), p);
}

}  // namespace

std::optional<IterationComparison> compare_iterations(const std::vector<double>& variant,
                                                      const std::vector<double>& reference) {
  if (variant.size() < 2 || reference.size() < 2) return std::nullopt;
  const Moments v = moments(variant), r = moments(reference);
  if (!(v.mean > 0) || !(r.mean > 0)) return std::nullopt;
  IterationComparison c;
  c.ratio = r.mean / v.mean;
  const double sv = v.var / v.n, sr = r.var / r.n, se = std::sqrt(sv + sr);
  // Welch-Satterthwaite; both samples without spread leave the test undefined (dof 1, t 0).
  c.dof = se > 0 ? (sv + sr) * (sv + sr) / (sv * sv / (v.n - 1) + sr * sr / (r.n - 1) + 1e-300)
                 : v.n + r.n - 2;
  if (se > 0) {
    c.t = (v.mean - r.mean) / se;
    c.p_more = boost::math::cdf(
        boost::math::complement(boost::math::students_t(std::max(c.dof, 1.0)), c.t));
  } else {
    c.t = v.mean == r.mean ? 0 : std::copysign(INFINITY, v.mean - r.mean);
    c.p_more = v.mean > r.mean ? 0 : v.mean == r.mean ? 0.5 : 1;
  }
  // log(r/v) has variance ~ var_r / (n_r r^2) + var_v / (n_v v^2).
  const double sl = std::sqrt(sr / (r.mean * r.mean) + sv / (v.mean * v.mean));
  const double tq = t_quantile(0.975, c.dof);
  c.ratio_lo = c.ratio * std::exp(-tq * sl);
  c.ratio_hi = c.ratio * std::exp(tq * sl);
  // n per side so that t(0.95) + t(0.80) <= 0.10 / cv * sqrt(n / 2), cv pooled over both.
  const double cv = std::sqrt((v.var / (v.mean * v.mean) + r.var / (r.mean * r.mean)) / 2);
  // From just below the normal approximation 2 (z_0.95 + z_0.80)^2 (cv / 0.1)^2 upwards: the t
  // quantiles only add seeds.
  const double z = 1.6448536269514722 + 0.8416212335729143;
  c.seeds_for_10pct =
      int(std::clamp(std::floor(2 * z * z * (cv / 0.10) * (cv / 0.10)), 2.0, 100000.0));
  while (c.seeds_for_10pct < 100000) {
    const double n = c.seeds_for_10pct, dof = 2 * n - 2;
    if (t_quantile(0.95, dof) + t_quantile(0.80, dof) <=
        0.10 / std::max(cv, 1e-12) * std::sqrt(n / 2))
      break;
    ++c.seeds_for_10pct;
  }
  return c;
}

}  // namespace tb
