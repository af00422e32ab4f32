#include <chrono>
#include <cmath>
#include <functional>

#include "platform/description.h"
#include "runner/measure.h"

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

std::vector<std::vector<double>> calls_per_second_interleaved(
    const std::vector<std::function<void()>>& steps, int trials, double trial_s) {
  using Clock = std::chrono::steady_clock;
  std::vector<int64_t> calls;
  for (const auto& step : steps) {
    // Warm-up: first touch of the outputs, library initialisation, kernel selection.
    const auto w0 = Clock::now();
    step();
    step();
    const double once = std::chrono::duration<double>(Clock::now() - w0).count() / 2;
    calls.push_back(std::max<int64_t>(1, int64_t(trial_s / std::max(once, 1e-6))));
  }
  std::vector<std::vector<double>> rates(steps.size());
  for (int i = 0; i < trials; ++i)
    for (size_t j = 0; j < steps.size(); ++j) {
      if (calls[j] > 1) steps[j]();
      const auto t0 = Clock::now();
      for (int64_t k = 0; k < calls[j]; ++k) steps[j]();
      rates[j].push_back(double(calls[j]) /
                         std::chrono::duration<double>(Clock::now() - t0).count());
    }
  return rates;
}

namespace {

torch::Dtype torch_dtype(const std::string& dtype) {
  return dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
}

// A 3x3 convolution (stride 1, padding 1, C = K channels) forward and backward on a batch of
// side x side maps, each call's gradients new, as in training.
std::function<void()> conv_training_step(const std::string& dtype, int64_t batch, int64_t channels,
                                         int64_t side) {
  const torch::Dtype t = torch_dtype(dtype);
  auto x = torch::randn({batch, channels, side, side}).to(t).requires_grad_();
  auto w = (torch::randn({channels, channels, 3, 3}) * 0.1).to(t).requires_grad_();
  const auto gy = torch::ones({batch, channels, side, side}).to(t);
  return [=]() mutable {
    torch::conv2d(x, w, {}, 1, 1).backward(gy);
    x.mutable_grad() = torch::Tensor();
    w.mutable_grad() = torch::Tensor();
  };
}

// calls_per_second_interleaved's rates of a call doing `flops`, as GFLOP/s trials.
Trials gflops_trials(const std::vector<double>& rates, double flops) {
  Trials t;
  for (const double r : rates) t.values.push_back(flops * r / 1e9);
  return t;
}

}  // namespace

GemmMeasurement measure_gemm(const std::string& dtype, const std::vector<int64_t>& sizes,
                             int trials, double trial_s) {
  const torch::Dtype t = torch_dtype(dtype);
  torch::NoGradGuard no_grad;
  std::vector<std::function<void()>> steps;
  for (int64_t n : sizes) {
    auto a = torch::randn({n, n}).to(t), b = torch::randn({n, n}).to(t);
    auto c = torch::empty({n, n}, a.options());
    steps.push_back([a, b, c]() mutable { torch::mm_out(c, a, b); });
  }
  const auto rates = calls_per_second_interleaved(steps, trials, trial_s);
  GemmMeasurement m;
  m.dtype = dtype;
  for (size_t j = 0; j < sizes.size(); ++j) {
    const double n = double(sizes[j]);
    GemmSize s{sizes[j], gflops_trials(rates[j], 2.0 * n * n * n)};
    if (s.gflops.best() > m.best_gflops) m.best_gflops = s.gflops.best(), m.best_n = sizes[j];
    m.sizes.push_back(std::move(s));
  }
  return m;
}

double gemm_rate_now(int64_t n, double window_s) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  std::function<void()> step = [&] { torch::mm_out(c, a, b); };
  // The best of three windows: what the machine can do at this point. A hiccup of a few
  // milliseconds (the thread pool waking after a one-core measurement) spoils one window;
  // a spell that the check is for spoils all three.
  const auto rates = calls_per_second_interleaved({step}, 3, window_s / 3);
  return 2.0 * double(n) * double(n) * double(n) *
         *std::max_element(rates[0].begin(), rates[0].end()) / 1e9;
}

std::vector<RowsGemm> measure_rows_gemm(const std::string& dtype, const std::vector<int64_t>& rows,
                                        const std::vector<int64_t>& sizes, int trials,
                                        double trial_s) {
  const torch::Dtype t = torch_dtype(dtype);
  torch::NoGradGuard no_grad;
  std::vector<RowsGemm> out;
  std::vector<std::function<void()>> steps;
  for (const int64_t m : rows)
    for (const int64_t n : sizes) {
      // As nn::Linear holds them: the weight out x in, used transposed in the forward pass.
      auto x = torch::randn({m, n}).to(t), w = torch::randn({n, n}).to(t);
      auto dy = torch::randn({m, n}).to(t);
      auto y = torch::empty({m, n}, x.options()), dx = torch::empty({m, n}, x.options());
      auto dw = torch::empty({n, n}, x.options());
      steps.push_back([=]() mutable {
        torch::mm_out(y, x, w.t());
        torch::mm_out(dx, dy, w);
        torch::mm_out(dw, dy.t(), x);
      });
      out.push_back({m, n, 3 * 2.0 * double(m) * double(n) * double(n), {}});
    }
  const auto rates = calls_per_second_interleaved(steps, trials, trial_s);
  for (size_t j = 0; j < out.size(); ++j) out[j].gflops = gflops_trials(rates[j], out[j].flops);
  return out;
}

namespace {

// A point's rate with `floor_s` per call taken out, as a fraction of the peak (at most 1); 0
// for a point shorter than twice its floor, whose rate is mostly the floor.
double beyond_floor(double flops, const Trials& gflops, double floor_s, double peak_gflops) {
  const double call_s = flops / (gflops.median() * 1e9);
  if (!(peak_gflops > 0) || !(call_s > 2 * floor_s)) return 0;
  return std::min(1.0, flops / (call_s - floor_s) / 1e9 / peak_gflops);
}

}  // namespace

std::vector<RowsFraction> rows_gemm_fractions(const std::vector<RowsGemm>& points,
                                              double peak_gflops, double floor_us) {
  std::vector<RowsFraction> out;
  for (const auto& g : points)
    if (const double f = beyond_floor(g.flops, g.gflops, 3 * floor_us * 1e-6, peak_gflops); f > 0)
      out.push_back({g.rows, g.n, f});
  return out;
}

ConvMeasurement measure_conv(const std::string& dtype, const std::vector<int64_t>& channels,
                             int trials, double trial_s) {
  constexpr int64_t kBatch = 16, kHw = 16;
  ConvMeasurement m;
  m.dtype = dtype;
  std::vector<std::function<void()>> steps;
  for (int64_t c : channels) {
    steps.push_back(conv_training_step(dtype, kBatch, c, kHw));
    const double M = double(kBatch * kHw * kHw), N = double(c), K = 9.0 * double(c);
    m.shapes.push_back({c, equivalent_square_n(M, N, K), 3 * 2 * M * N * K, {}});
  }
  const auto rates = calls_per_second_interleaved(steps, trials, trial_s);
  for (size_t j = 0; j < m.shapes.size(); ++j)
    m.shapes[j].gflops = gflops_trials(rates[j], m.shapes[j].flops);
  return m;
}

std::vector<ConvGridPoint> measure_conv_grid(const std::string& dtype,
                                             const std::vector<int64_t>& sides,
                                             const std::vector<int64_t>& channels, int trials,
                                             double trial_s) {
  constexpr int64_t kBatch = 8;
  std::vector<ConvGridPoint> points;
  std::vector<std::function<void()>> steps;
  for (int64_t side : sides)
    for (int64_t c : channels) {
      const double M = double(kBatch * side * side), flops = 3 * 2 * M * double(c) * 9 * c;
      if (flops > kConvGridMaxFlops) continue;
      steps.push_back(conv_training_step(dtype, kBatch, c, side));
      points.push_back({int64_t(M), c, flops, {}});
    }
  const auto rates = calls_per_second_interleaved(steps, trials, trial_s);
  for (size_t j = 0; j < points.size(); ++j)
    points[j].gflops = gflops_trials(rates[j], points[j].flops);
  return points;
}

std::vector<RowsFraction> conv_grid_fractions(const std::vector<ConvGridPoint>& points,
                                              double peak_gflops, double floor_us) {
  std::vector<RowsFraction> out;
  for (const auto& p : points)
    if (const double f = beyond_floor(p.flops, p.gflops, floor_us * 1e-6, peak_gflops); f > 0)
      out.push_back({p.rows, p.channels, f});
  return out;
}

Trials measure_conv_floor(const std::string& dtype, int trials, double trial_s) {
  using Clock = std::chrono::steady_clock;
  auto step = conv_training_step(dtype, 16, 8, 2);
  for (int i = 0; i < 20; ++i) step();  // primitive caches, page faults
  Trials us;
  for (int i = 0; i < trials; ++i) {
    int64_t calls = 0;
    const auto t0 = Clock::now();
    double dt = 0;
    while (dt < trial_s) {
      step();
      ++calls;
      dt = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    us.values.push_back(dt / double(calls) * 1e6);
  }
  return us;
}

std::vector<std::pair<int64_t, double>> conv_fractions(const ConvMeasurement& m, double peak_gflops,
                                                       double floor_us) {
  std::vector<RatePoint> points;
  for (const auto& s : m.shapes) points.push_back({s.n, s.flops, s.gflops.median()});
  return efficiency_curve(points, peak_gflops, floor_us);
}

}  // namespace tb
