#include <chrono>

#include "platform/measure.h"

namespace tb {

double Trials::best() const {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

double Trials::median() const {
  if (values.empty()) return 0;
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

GemmMeasurement measure_gemm(const std::string& dtype, const std::vector<int64_t>& sizes,
                             int trials, double trial_s) {
  using Clock = std::chrono::steady_clock;
  const torch::Dtype t = dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  GemmMeasurement m;
  m.dtype = dtype;
  for (int64_t n : sizes) {
    torch::NoGradGuard no_grad;
    auto a = torch::randn({n, n}).to(t), b = torch::randn({n, n}).to(t);
    auto c = torch::empty({n, n}, a.options());
    // Warm-up: first-touch of c, library initialisation, kernel selection.
    auto w0 = Clock::now();
    torch::mm_out(c, a, b);
    torch::mm_out(c, a, b);
    const double once = std::chrono::duration<double>(Clock::now() - w0).count() / 2;
    const int64_t calls = std::max<int64_t>(1, int64_t(trial_s / std::max(once, 1e-6)));
    GemmSize s{n, {}};
    for (int i = 0; i < trials; ++i) {
      auto t0 = Clock::now();
      for (int64_t k = 0; k < calls; ++k) torch::mm_out(c, a, b);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      s.gflops.values.push_back(2.0 * n * n * n * calls / dt / 1e9);
    }
    if (s.gflops.best() > m.best_gflops) m.best_gflops = s.gflops.best(), m.best_n = n;
    m.sizes.push_back(std::move(s));
  }
  return m;
}

}  // namespace tb
