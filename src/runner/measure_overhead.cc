#include <chrono>
#include <cmath>
#include <functional>

#include "runner/measure.h"

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds per call of `call`, repeated over a window after `warmup` calls.
template <typename F>
double seconds_per_call(F&& call, int warmup, double window_s) {
  for (int i = 0; i < warmup; ++i) call();
  int64_t calls = 0;
  const auto t0 = Clock::now();
  do call(), ++calls;
  while (seconds_since(t0) < window_s);
  return seconds_since(t0) / double(calls);
}

// LibTorch's recurrent layer for a cell, with its forward returning the output sequence (the
// states differ in type between the cells).
struct CellLayer {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

CellLayer cell_layer(const std::string& cell, int64_t width) {
  auto of = [](auto m) -> CellLayer {
    return {m.ptr(), [m](const torch::Tensor& x) mutable { return std::get<0>(m->forward(x)); }};
  };
  return cell == "lstm"  ? of(torch::nn::LSTM(torch::nn::LSTMOptions(width, width)))
         : cell == "gru" ? of(torch::nn::GRU(torch::nn::GRUOptions(width, width)))
                         : of(torch::nn::RNN(torch::nn::RNNOptions(width, width)));
}

// Microseconds per time step of each of `layers`, forward + backward: two lengths in
// alternating windows, so that what a call costs once (stacking the outputs, the loss)
// cancels; every layer's two windows once per round (calls_per_second_interleaved).
struct StepLayer {
  std::string cell;
  int64_t width = 0, batch = 0;
};
std::vector<Trials> per_time_step(const std::vector<StepLayer>& layers, bool input_grad,
                                  int64_t short_len, int64_t long_len, int trials, double trial_s) {
  std::vector<std::function<void()>> calls;  // per layer: the short length, then the long
  for (const auto& l : layers) {
    const CellLayer layer = cell_layer(l.cell, l.width);
    for (const int64_t length : {short_len, long_len}) {
      auto x = torch::randn({length, l.batch, l.width});
      if (input_grad) x.requires_grad_(true);
      calls.push_back([layer, x, input_grad]() mutable {
        layer.forward(x).sum().backward();
        for (auto& p : layer.module->parameters()) p.mutable_grad() = torch::Tensor();
        if (input_grad) x.mutable_grad() = torch::Tensor();
      });
    }
  }
  const auto rates = calls_per_second_interleaved(calls, trials, trial_s / 2);
  std::vector<Trials> out(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    for (size_t t = 0; t < rates[2 * i].size(); ++t)
      out[i].values.push_back(std::max(0.0, 1 / rates[2 * i + 1][t] - 1 / rates[2 * i][t]) /
                              double(long_len - short_len) * 1e6);
  return out;
}

}  // namespace

OverheadMeasurement measure_overhead(int trials, double trial_s) {
  OverheadMeasurement m;
  // Long enough that backward()'s own start-up is spread thin, short enough that the
  // graph stays in cache.
  m.chain = 64;
  {
    torch::NoGradGuard no_grad;
    auto a = torch::ones({1, 1}), b = torch::ones({1, 1}), c = torch::empty({1, 1});
    for (int i = 0; i < 100; ++i) torch::mm_out(c, a, b);
    for (int t = 0; t < trials; ++t) {
      int64_t calls = 0;
      const auto t0 = Clock::now();
      do {
        for (int i = 0; i < 100; ++i) torch::mm_out(c, a, b);
        calls += 100;
      } while (seconds_since(t0) < trial_s);
      m.mm_call_us.values.push_back(seconds_since(t0) / calls * 1e6);
    }
  }
  // A chain of tiny multiply-adds with a gradient: what a small model's step is made of,
  // without any arithmetic worth the name.
  auto x = torch::ones({8}, torch::requires_grad());
  const auto w = torch::full({8}, 0.5);
  auto step = [&](double* fwd_s, double* bwd_s) {
    const auto t0 = Clock::now();
    torch::Tensor y = x;
    for (int i = 0; i < m.chain; i += 2) y = (y * w) + w;
    const auto t1 = Clock::now();
    y.sum().backward();
    *fwd_s += std::chrono::duration<double>(t1 - t0).count();
    *bwd_s += seconds_since(t1);
    x.grad().zero_();
  };
  double f = 0, b = 0;
  for (int i = 0; i < 20; ++i) step(&f, &b);
  for (int t = 0; t < trials; ++t) {
    f = b = 0;
    int64_t steps = 0;
    const auto t0 = Clock::now();
    do step(&f, &b), ++steps;
    while (seconds_since(t0) < trial_s);
    // sum() is one more operator and one more node; zero_() runs outside both timings.
    m.forward_us.values.push_back(f / steps / (m.chain + 1) * 1e6);
    m.backward_us.values.push_back(b / steps / (m.chain + 1) * 1e6);
  }
  return m;
}

std::map<std::string, Trials> measure_elementwise_ops(int trials, double trial_s) {
  const std::vector<int64_t> shape = {32, 16, 16, 16};
  const double elements = 32.0 * 16 * 16 * 16;
  auto x = torch::randn(shape).requires_grad_();
  auto x2 = torch::randn(shape).requires_grad_();
  auto gamma = torch::ones({16}).requires_grad_(), beta = torch::zeros({16}).requires_grad_();
  auto mean = torch::zeros({16}), var = torch::ones({16});
  auto depthwise = torch::randn({16, 1, 3, 3}).requires_grad_();
  const auto labels = torch::randint(0, 256, {512}, torch::kLong);
  const std::vector<std::pair<std::string, std::function<torch::Tensor()>>> ops = {
      {"batchnorm",
       [&] { return torch::batch_norm(x, gamma, beta, mean, var, true, 0.1, 1e-5, false); }},
      {"maxpool",
       [&] {
         return torch::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"avgpool",
       [&] {
         return torch::adaptive_avg_pool2d(x, {1, 1});
       }},
      {"relu", [&] { return torch::relu(x); }},
      {"add", [&] { return x + x2; }},
      // 3x3, stride 1, one channel per group (MobileNet's): input and weight gradients.
      {"gconv2d", [&] { return torch::conv2d(x, depthwise, {}, 1, 1, 1, 16); }},
      // The loss as the families compute it: log-softmax and NLL over the same elements,
      // 512 rows of 256 classes.
      {"softmax_xent", [&] {
         return torch::nn::functional::cross_entropy(x.view({512, 256}), labels);
       }}};
  std::map<std::string, Trials> out;
  for (const auto& [name, forward] : ops) {
    auto step = [&] {
      const torch::Tensor y = forward();
      y.backward(torch::ones_like(y));
      for (auto* t : {&x, &x2, &gamma, &beta, &depthwise}) t->mutable_grad() = torch::Tensor();
    };
    for (int i = 0; i < 3; ++i) step();
    for (int t = 0; t < trials; ++t) {
      int64_t steps = 0;
      const auto t0 = Clock::now();
      do step(), ++steps;
      while (seconds_since(t0) < trial_s);
      out[name].values.push_back(seconds_since(t0) / double(steps) / elements * 1e9);
    }
  }
  return out;
}

std::map<std::string, LayerCallTrials> measure_layer_calls(int trials, double trial_s) {
  constexpr int64_t kShort = 2, kLong = 10;
  const std::vector<int64_t> shape = {kLayerCallShape[0], kLayerCallShape[1], kLayerCallShape[2],
                                      kLayerCallShape[3]};
  // Each layer's input is the last one's output, as in a model; every batchnorm has its own
  // affine parameters and running statistics. The add adds a tensor to itself: forward an
  // add, backward the sum of the two gradients at the fork, as a residual block's merge and
  // split. The pools are the kernels op_ns_per_element times (3x3 stride 2 padding 1, global
  // average): after the first two layers of a chain their maps are 1 x 1, so the layers the
  // two chains differ by see 16 x 8 x 1 x 1 (LayerCallTrials::elements).
  using Layer = std::function<torch::Tensor(const torch::Tensor&, size_t)>;
  const auto chain_of = [&](const std::string& op, int64_t layers) {
    std::vector<torch::Tensor> gammas, betas, means, vars;
    for (int64_t i = 0; i < layers; ++i) {
      gammas.push_back(torch::ones({shape[1]}).requires_grad_());
      betas.push_back(torch::zeros({shape[1]}).requires_grad_());
      means.push_back(torch::zeros({shape[1]}));
      vars.push_back(torch::ones({shape[1]}));
    }
    // Chosen before the timed loop, which then runs the layer alone.
    const Layer layer = op == "batchnorm" ? Layer([=](const torch::Tensor& y, size_t i) {
      return torch::batch_norm(y, gammas[i], betas[i], means[i], vars[i], true, 0.1, 1e-5, false);
    })
                        : op == "maxpool" ? Layer([](const torch::Tensor& y, size_t) {
                            return torch::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
                          })
                        : op == "avgpool" ? Layer([](const torch::Tensor& y, size_t) {
                            return torch::adaptive_avg_pool2d(y, {1, 1});
                          })
                        : op == "relu"
                            ? Layer([](const torch::Tensor& y, size_t) { return torch::relu(y); })
                            : Layer([](const torch::Tensor& y, size_t) { return y + y; });
    auto x = torch::randn(shape).requires_grad_();
    return [=](double* fwd_s, double* bwd_s) mutable {
      const auto t0 = Clock::now();
      torch::Tensor y = x;
      for (int64_t i = 0; i < layers; ++i) y = layer(y, size_t(i));
      y = y.sum();
      const auto t1 = Clock::now();
      // Backward through freeing the graph, as a training step pays it.
      y.backward();
      y = torch::Tensor();
      x.mutable_grad() = torch::Tensor();
      for (auto& p : gammas) p.mutable_grad() = torch::Tensor();
      for (auto& p : betas) p.mutable_grad() = torch::Tensor();
      *fwd_s += std::chrono::duration<double>(t1 - t0).count();
      *bwd_s += seconds_since(t1);
    };
  };
  std::map<std::string, LayerCallTrials> out;
  for (const std::string op : {"batchnorm", "maxpool", "avgpool", "relu", "add"}) {
    auto short_chain = chain_of(op, kShort), long_chain = chain_of(op, kLong);
    // Seconds per call of forward and of backward over a window.
    const auto window = [](auto& chain, double s) {
      double f = 0, b = 0;
      int64_t calls = 0;
      const auto t0 = Clock::now();
      do chain(&f, &b), ++calls;
      while (seconds_since(t0) < s);
      return std::pair{f / double(calls), b / double(calls)};
    };
    window(short_chain, 0.02);
    window(long_chain, 0.02);
    auto& o = out[op];
    o.elements = op == "maxpool" || op == "avgpool"
                     ? double(shape[0] * shape[1])
                     : double(shape[0] * shape[1] * shape[2] * shape[3]);
    for (int t = 0; t < trials; ++t) {
      // Interleaved, so that a slow spell of the machine lands on both lengths.
      const auto [fs, bs] = window(short_chain, trial_s / 2);
      const auto [fl, bl] = window(long_chain, trial_s / 2);
      o.forward.values.push_back(std::max(0.0, fl - fs) / double(kLong - kShort) * 1e6);
      o.backward.values.push_back(std::max(0.0, bl - bs) / double(kLong - kShort) * 1e6);
    }
  }
  return out;
}

std::map<std::string, Trials> measure_cell_steps(int trials, double trial_s) {
  // Width 8, batch 1: the arithmetic is negligible, the operators and autograd nodes of a
  // step are not.
  std::map<std::string, Trials> out;
  const std::vector<StepLayer> layers = {{"rnn", 8, 1}, {"lstm", 8, 1}, {"gru", 8, 1}};
  const auto t = per_time_step(layers, false, 8, 40, trials, trial_s);
  for (size_t i = 0; i < layers.size(); ++i) out[layers[i].cell] = t[i];
  return out;
}

std::map<std::string, std::vector<CellStepTime>> measure_cell_step_table(int trials,
                                                                         double trial_s) {
  std::vector<StepLayer> layers;
  for (const std::string cell : {"rnn", "lstm", "gru"})
    for (const int64_t hidden : kCellTableHidden)
      for (const int64_t batch : kCellTableBatch) layers.push_back({cell, hidden, batch});
  const auto t = per_time_step(layers, true, 4, 16, trials, trial_s);
  std::map<std::string, std::vector<CellStepTime>> out;
  for (size_t i = 0; i < layers.size(); ++i)
    out[layers[i].cell].push_back({layers[i].width, layers[i].batch, t[i]});
  return out;
}

std::map<std::string, Trials> measure_cell_elementwise(int trials, double trial_s) {
  constexpr int64_t kBatch = 32, kNarrow = 64, kWide = 192;
  std::map<std::string, Trials> out;
  for (const std::string cell : {"rnn", "lstm", "gru"}) {
    const int64_t gates = cell == "lstm" ? 4 : cell == "gru" ? 3 : 1;
    auto at_width = [&](int64_t hidden, double window_s) {
      // hh and ih stand for the two GEMMs' outputs (the projected input and linear_hh(h)).
      // Where the cell updates the fresh GEMM output in place, this adds out of place: the
      // same passes over the same elements, without a copy the cell does not make.
      const auto leaf = [&](int64_t cols) {
        return torch::randn({kBatch, cols}).requires_grad_(true);
      };
      torch::Tensor hh = leaf(gates * hidden), ih = leaf(gates * hidden), h = leaf(hidden),
                    c = leaf(hidden);
      auto step = [&]() -> torch::Tensor {
        if (cell == "lstm") {
          const auto g = hh.add(ih).unsafe_chunk(4, 1);
          const auto i = g[0].sigmoid_(), f = g[1].sigmoid_(), u = g[2].tanh_(),
                     o = g[3].sigmoid_();
          const auto cy = (f * c).add_(i * u);
          return (o * cy.tanh()).sum() + cy.sum();
        }
        if (cell == "gru") {
          const auto ig = ih.unsafe_chunk(3, 1), hg = hh.unsafe_chunk(3, 1);
          const auto r = hg[0].add(ig[0]).sigmoid_(), z = hg[1].add(ig[1]).sigmoid_();
          const auto n = ig[2].add(hg[2] * r).tanh_();
          return (h - n).mul_(z).add_(n).sum();
        }
        return hh.add(ih).tanh_().sum();
      };
      return seconds_per_call(
          [&] {
            step().backward();
            for (torch::Tensor* t : {&hh, &ih, &h, &c}) t->mutable_grad() = torch::Tensor();
          },
          3, window_s);
    };
    const double added = double(kBatch * gates * (kWide - kNarrow));
    for (int t = 0; t < trials; ++t) {
      const double narrow = at_width(kNarrow, trial_s / 2);
      const double wide = at_width(kWide, trial_s / 2);
      out[cell].values.push_back(std::max(0.0, wide - narrow) / added * 1e9);
    }
  }
  return out;
}

std::vector<std::pair<int64_t, double>> efficiency_curve(const std::vector<RatePoint>& points,
                                                         double peak_gflops, double floor_us) {
  std::vector<std::pair<int64_t, double>> out;
  if (!(peak_gflops > 0)) return out;
  for (const auto& p : points) {
    const double rate = p.gflops * 1e9;
    if (!(rate > 0)) continue;
    const double kernel_s = p.flops / rate - floor_us * 1e-6;
    const int64_t n = int64_t(std::llround(p.n));
    // A call shorter than twice the floor leaves less than the floor, and the floor's own
    // spread between trials (10% and more on a shared machine) then decides the fraction: a
    // 16^3 GEMM 2% above a 0.47 us floor read as 100% of the peak.
    if (!(kernel_s >= floor_us * 1e-6) || !(kernel_s > 0) || n < 1 ||
        (!out.empty() && out.back().first >= n))
      continue;
    out.push_back({n, std::min(1.0, p.flops / kernel_s / (peak_gflops * 1e9))});
  }
  return out;
}

std::vector<std::pair<int64_t, double>> gemm_fractions(const GemmMeasurement& g, double peak_gflops,
                                                       double floor_us) {
  std::vector<RatePoint> points;
  for (const auto& s : g.sizes)
    points.push_back({double(s.n), 2.0 * s.n * s.n * s.n, s.gflops.median()});
  return efficiency_curve(points, peak_gflops, floor_us);
}

}  // namespace tb
