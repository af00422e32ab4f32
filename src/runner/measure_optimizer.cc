#include <chrono>

#include "platform/description.h"
#include "runner/measure.h"
#include "runner/runner.h"
#include "spec/config.h"

namespace tb {

std::map<std::string, Trials> measure_optimizer_steps(const std::string& dtype, int trials,
                                                      double trial_s) {
  using Clock = std::chrono::steady_clock;
  // The dtypes a CPU description measures; others would be measured as something else.
  if (dtype != "fp32" && dtype != "bf16") return {};
  const torch::Dtype t = dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  // Four tensors of 512K parameters: a training step's weight matrices are of this order
  // (a 1024 x 512 layer), and each is updated while the next waits, as in a step.
  constexpr int64_t kTensors = 4, kRows = 512, kCols = 1024;
  constexpr double kParams = double(kTensors * kRows * kCols);
  static_assert(kParams == kOptimizerMeasuredParams, "the simulator scales the rate from here");
  std::map<std::string, Trials> out;
  for (const std::string opt : {"sgd", "momentum", "adam", "adamw", "rmsprop"}) {
    std::vector<torch::Tensor> params;
    for (int64_t i = 0; i < kTensors; ++i) {
      auto p = (torch::randn({kRows, kCols}) * 0.05).to(t).requires_grad_(true);
      p.mutable_grad() = (torch::randn({kRows, kCols}) * 1e-3).to(t);
      params.push_back(p);
    }
    const auto optimizer = make_optimizer(parse_config("fc:optimizer=" + opt), params);
    // Warm-up: the state's allocation (the first step), first touches.
    for (int i = 0; i < 3; ++i) optimizer->step();
    auto w0 = Clock::now();
    optimizer->step();
    const double once = std::chrono::duration<double>(Clock::now() - w0).count();
    const int64_t calls = std::max<int64_t>(1, int64_t(trial_s / std::max(once, 1e-6)));
    for (int i = 0; i < trials; ++i) {
      const auto t0 = Clock::now();
      for (int64_t k = 0; k < calls; ++k) optimizer->step();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      out[opt].values.push_back(dt / double(calls) / kParams * 1e9);
    }
  }
  return out;
}

}  // namespace tb
