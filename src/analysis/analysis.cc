#include "analysis/analysis.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tb {

bool geometric_axis(const std::vector<double>& v) {
  if (v.empty()) return false;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo > 0 && *hi / *lo >= 8;
}

std::optional<double> param_number(const std::map<std::string, std::string>& params,
                                   const std::string& key) {
  auto it = params.find(key);
  if (it == params.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<Sample> samples_of(const std::vector<Point>& points,
                               const std::vector<std::string>& params) {
  std::vector<Sample> out;
  for (const auto& p : points) {
    if (!p.value || !std::isfinite(*p.value)) continue;
    Sample s{p.config, {}, *p.value};
    bool complete = true;
    for (const auto& k : params) {
      const auto v = param_number(p.params, k);
      if (!v) {
        complete = false;
        break;
      }
      s.params[k] = *v;
    }
    if (complete) out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ranked_params(const Regression& r) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < r.log2_scaled.size(); ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::abs(r.weights[a]) > std::abs(r.weights[b]);
  });
  std::vector<std::string> out;
  for (size_t i : idx) out.push_back(r.terms[i]);
  return out;
}

Regression sensitivity(const std::vector<Sample>& samples, const std::vector<std::string>& params,
                       bool second_order) {
  Regression r;
  const size_t n = samples.size(), k = params.size();
  std::vector<std::vector<double>> cols(k);
  for (size_t j = 0; j < k; ++j) {
    for (const auto& s : samples) cols[j].push_back(s.params.at(params[j]));
    const bool lg = geometric_axis(cols[j]);
    r.log2_scaled.push_back(lg);
    if (lg)
      for (double& x : cols[j]) x = std::log2(x);
  }
  // Standardize; a constant column carries no information and gets weight 0.
  auto standardize = [n](std::vector<double>& c) {
    double mean = 0, ss = 0;
    for (double x : c) mean += x;
    mean /= double(n);
    for (double x : c) ss += (x - mean) * (x - mean);
    const double sd = std::sqrt(ss / double(n));
    for (double& x : c) x = sd > 0 ? (x - mean) / sd : 0;
  };
  for (auto& c : cols) standardize(c);
  r.terms = params;
  if (second_order) {
    for (size_t a = 0; a < k; ++a)
      for (size_t b = a; b < k; ++b) {
        std::vector<double> c(n);
        for (size_t i = 0; i < n; ++i) c[i] = cols[a][i] * cols[b][i];
        standardize(c);
        cols.push_back(c);
        r.terms.push_back(params[a] + "*" + params[b]);
      }
  }
  const size_t m = cols.size();
  if (n < m + 1) throw std::invalid_argument("regression needs more samples than terms");
  Eigen::MatrixXd X(n, m + 1);
  Eigen::VectorXd y(n);
  for (size_t i = 0; i < n; ++i) {
    X(i, 0) = 1;
    for (size_t j = 0; j < m; ++j) X(i, j + 1) = cols[j][i];
    y(i) = samples[i].value;
  }
  const Eigen::VectorXd w = X.colPivHouseholderQr().solve(y);
  r.intercept = w(0);
  for (size_t j = 0; j < m; ++j) r.weights.push_back(w(j + 1));
  const Eigen::VectorXd residual = y - X * w;
  const double mean = y.mean();
  const double ss_tot = (y.array() - mean).square().sum();
  r.r2 = ss_tot > 0 ? 1 - residual.squaredNorm() / ss_tot : 1;
  r.samples = n;
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

BoxStats box_stats(std::vector<double> v) {
  BoxStats b;
  b.n = v.size();
  if (v.empty()) return b;
  std::sort(v.begin(), v.end());
  // The whiskers are observed values (nearest rank): interpolated, the 2nd and 98th
  // percentiles of fewer than 50 runs fall strictly inside the smallest and largest, which
  // every box then drew as outliers (2 of 2, 2 of 4).
  const auto rank = [&](double p) {
    const size_t r = size_t(std::ceil(p / 100 * double(v.size())));
    return v[std::clamp<size_t>(r, 1, v.size()) - 1];
  };
  b.p2 = rank(2), b.p9 = percentile(v, 9), b.p50 = percentile(v, 50);
  b.p91 = percentile(v, 91), b.p98 = rank(98);
  for (double x : v)
    if (x < b.p2 || x > b.p98) b.outliers.push_back(x);
  return b;
}

Comparison compare(const std::map<std::string, double>& a, const std::map<std::string, double>& b) {
  Comparison c;
  double log_sum = 0;
  size_t faster = 0;
  for (const auto& [config, va] : a) {
    auto it = b.find(config);
    if (it == b.end()) {
      ++c.only_a;
      continue;
    }
    if (!(va > 0) || !(it->second > 0)) continue;
    const double s = it->second / va;
    c.matched.push_back({config, va, it->second, s});
    log_sum += std::log(s);
    faster += s > 1;
  }
  for (const auto& [config, vb] : b) c.only_b += a.count(config) == 0;
  if (!c.matched.empty()) {
    c.geomean = std::exp(log_sum / double(c.matched.size()));
    c.share_b_faster = double(faster) / double(c.matched.size());
  }
  return c;
}

double amdahl_serial_fraction(const std::map<int, double>& t) {
  auto base = t.find(1);
  if (base == t.end() || t.size() < 2)
    throw std::invalid_argument("Amdahl fit needs n=1 and one more point");
  // 1/S(n) = s + (1 - s)/n  <=>  1/S(n) - 1/n = s (1 - 1/n): least squares through the origin.
  double num = 0, den = 0;
  for (const auto& [n, thr] : t) {
    if (n <= 1) continue;
    const double inv_speedup = base->second / thr, x = 1 - 1.0 / n;
    num += x * (inv_speedup - 1.0 / n);
    den += x * x;
  }
  // Unclamped: a fit above 1 (the series slows down) or below 0 (faster than linear) says the
  // law does not describe it, which a clamped 1.000 or 0.000 hid (analysis/scaling.h).
  return num / den;
}

}  // namespace tb
