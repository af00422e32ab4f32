#include "runner/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <map>
#include <numeric>

#include "base/errors.h"
#include "base/sizes.h"
#include "emulation/numerics_workload.h"
#include "model/phase.h"
#include "model/workload.h"
#include "platform/blas.h"
#include "platform/core_latency.h"
#include "platform/host.h"
#include "runner/cpu_usage.h"
#include "runner/failure.h"
#include "runner/profile.h"
#include "runner/stack_runtime.h"
#include "runner/threads.h"
#include "runner/torchscript.h"

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

void synchronize(torch::Device device) {
  // CPU work is synchronous; an accelerator must be drained before the clock is read.
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& config,
                                                        torch::nn::Module& module) {
  return make_optimizer(config, module.parameters());
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& config,
                                                        std::vector<torch::Tensor> params) {
  const std::string& kind = config.get("optimizer");
  if (kind == "rmsprop")
    return std::make_unique<torch::optim::RMSprop>(
        params, torch::optim::RMSpropOptions(1e-3).alpha(0.9).momentum(0.9).eps(1.0));
  if (kind == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-3));
  if (kind == "adamw")
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  if (kind == "momentum")
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(1e-3).momentum(0.9));
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3));
}

void train_step(Workload& w, torch::optim::Optimizer& opt, const Batch& batch,
                torch::Device device) {
  // Gradients are released rather than zeroed, as PyTorch 2.x does by default, so the
  // step is the same on every LibTorch release.
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
  if (w.custom_step(opt, batch)) {
    synchronize(device);
    return;
  }
  torch::Tensor loss;
  {
    PhaseScope phase(Phase::kForward);
    loss = w.loss(batch);
  }
  {
    PhaseScope phase(Phase::kBackward);
    loss.backward();
  }
  {
    PhaseScope phase(Phase::kOptimizer);
    opt.step();
    synchronize(device);
  }
}

namespace {
// The phases' means over the steps after the warm-up; "other" is what the step's own clock
// saw outside them (releasing gradients, a custom step's unmarked parts).
std::map<std::string, double> phase_means(const std::array<std::vector<double>, kPhaseCount>& p,
                                          const std::vector<double>& steps, size_t warmup) {
  if (steps.size() <= warmup) return {};
  const double n = double(steps.size() - warmup);
  const auto mean = [&](const std::vector<double>& v) {
    return std::accumulate(v.begin() + long(warmup), v.end(), 0.0) / n;
  };
  std::map<std::string, double> out;
  double marked = 0;
  for (const Phase ph : {Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    out[phase_name(ph)] = mean(p[size_t(ph)]);
    marked += out[phase_name(ph)];
  }
  out[phase_name(Phase::kOther)] = std::max(0.0, mean(steps) - marked);
  return out;
}
}  // namespace

TrainingSetup prepare_training(const Config& config, torch::Device device, uint64_t seed,
                               const std::string& mode) {
  TrainingSetup t;
  torch::manual_seed(seed);
  t.workload = build_workload(config);
  const num::NumericsPolicy numerics = num::parse_numerics(config.get("numerics"));
  if (!numerics.is_fp32() && mode == "torchscript")
    throw Unsupported("numerics=" + numerics.str() + " in torchscript mode: a traced step " +
                      "has no activation points");
  t.workload = emu::with_numerics(std::move(t.workload), numerics, seed);
  const torch::Dtype dtype = dtype_of(config);
  t.workload->module().to(device, dtype);
  t.workload->module().train();
  t.batch = t.workload->make_batch(device, dtype, seed);
  if (mode == "torchscript") t.workload = trace_workload(std::move(t.workload), t.batch);
  t.optimizer = make_optimizer(config, t.workload->module());
  return t;
}

std::optional<RunResult> refuse_before_running(const Config& config, const RunOptions& options) {
  // Without a cost description nothing is known before the model is built.
  if (!has_cost(config.family())) return std::nullopt;
  const StepCost cost = step_cost(config);
  const double limit =
      options.memory_limit > 0 ? options.memory_limit : double(available_memory_bytes());
  if (cost.memory.total() <= limit) return std::nullopt;
  RunResult r;
  r.config = config.str();
  r.family = config.family();
  r.throughput_unit = config.schema().throughput_unit;
  r.device = config.get("device");
  r.cost = cost;
  r.status = Status::kOomPredicted;
  r.error = fmt::format("estimated training memory {} exceeds the {} available",
                        bytes_iec(cost.memory.total()), bytes_iec(limit));
  r.started_at = r.finished_at = utc_now_iso();
  return r;
}

RunResult run_config(const Config& input, const RunOptions& options) {
  Config config = input;
  RunResult r;
  r.family = config.family();
  r.throughput_unit = config.schema().throughput_unit;
  r.started_at = utc_now_iso();
  r.threads = apply_threads(int(config.get_int("threads")));
  apply_stack(options.stack);
  r.blas_threads = detect_blas().threads;
  r.stack = options.stack.str();
  const DetectedStack detected = detect_stack(options.stack.mode);
  r.stack_detected = to_json(detected);
  r.stack_mismatch = stack_mismatch(options.stack, detected);
  config.set("threads", std::to_string(r.threads));
  r.config = config.str();
  r.device = config.get("device");
  const bool analytic = has_cost(config.family());
  if (analytic) r.cost = step_cost(config);
  const std::string dtype = config.get("dtype");
  r.peak_flops = options.peak_flops;
  if (!r.peak_flops && options.platform) {
    r.peak_flops = options.platform->peak_flops(dtype);
    if (r.peak_flops && options.platform->cores > 0) r.peak_cores = options.platform->cores;
  }
  auto done = [&](Status s, const std::string& why) {
    r.status = s;
    r.error = why;
    r.finished_at = utc_now_iso();
    return r;
  };

  if (auto refused = refuse_before_running(config, options)) {
    refused->threads = r.threads;
    refused->blas_threads = r.blas_threads;
    refused->config = r.config;
    refused->started_at = r.started_at;
    return *refused;
  }

  try {
    const torch::Device device(r.device);
    if (device.is_cuda() && !torch::cuda::is_available())
      return done(Status::kUnsupported,
                  "device " + r.device + ": this LibTorch has no CUDA device");
    auto [workload, batch, opt] =
        prepare_training(config, device, options.seed, options.stack.mode);
    r.examples_per_step = workload->examples_per_step();
    r.units_per_step = workload->units_per_step();
    if (!analytic) r.cost = measured_step_cost(config, *workload, *opt, batch, device);

    if (!device.is_cuda() && r.threads >= 2)
      if (const auto rt = core_round_trip()) r.core_round_trip_ns = rt->ns;
    SteadyStateMonitor monitor(options.timing);
    // Each step's phase times, so that their means cover the same steps as the step time's.
    std::array<std::vector<double>, kPhaseCount> phases;
    const CpuSnapshot cpu_begin = cpu_snapshot();
    const auto loop_start = Clock::now();
    for (;;) {
      const auto p0 = phase_seconds();
      const auto t0 = Clock::now();
      train_step(*workload, *opt, batch, device);
      const auto t1 = Clock::now();
      const auto p1 = phase_seconds();
      for (size_t i = 0; i < phases.size(); ++i) phases[i].push_back(p1[i] - p0[i]);
      if (monitor.add(std::chrono::duration<double>(t1 - t0).count(),
                      std::chrono::duration<double>(t1 - loop_start).count()))
        break;
    }
    r.cpu = cpu_usage(cpu_begin, cpu_snapshot());
    r.steps = monitor.result();
    r.step_times = monitor.times();
    // On an accelerator the clocks at the phases' edges see launches, not the work (the step
    // synchronizes once, at its end): no phases there.
    if (!device.is_cuda()) r.phase_s = phase_means(phases, r.step_times, size_t(r.steps.warmup));
  } catch (...) {
    const Failure f = current_failure("during the run");
    return done(f.status, f.error);
  }

  if (r.steps.mean > 0) {
    r.examples_per_s = r.examples_per_step / r.steps.mean;
    r.units_per_s = r.units_per_step / r.steps.mean;
    r.achieved_flops = r.cost.flops() / r.steps.mean;
    if (r.peak_flops && *r.peak_flops > 0) r.flops_utilization = r.achieved_flops / *r.peak_flops;
    if (options.platform)
      r.roofline =
          place_on_roofline(*options.platform, dtype, r.cost.intensity(), r.achieved_flops);
  }
  return done(Status::kOk, "");
}

}  // namespace tb
