#pragma once
#include <optional>

#include "model/workload.h"
#include "platform/description.h"
#include "record/result.h"
#include "runner/steady_state.h"
#include "spec/config.h"
#include "spec/stack.h"

namespace tb {

struct RunOptions {
  SteadyStateOptions timing;
  uint64_t seed = 1;
  // What the hardware can do: gives FLOPS utilization and the roofline placement.
  std::optional<PlatformDescription> platform;
  std::optional<double> peak_flops;  // overrides the platform's peak for the config's dtype
  // Refuse configs whose estimated training memory exceeds this (bytes); 0: MemAvailable.
  double memory_limit = 0;
  // The software stack requested (ParaDnn section 6). Its BLAS must already be in place
  // (enter_blas); oneDNN, BLAS threads and the execution mode are applied by run_config.
  StackSpec stack;
};

// Builds the config's model and data, trains it until the step time is known to the
// requested precision, and returns what was measured. Never throws for problems of
// the run itself: they come back as a status (oom, unsupported, crashed, ...).
RunResult run_config(const Config& config, const RunOptions& options);

// The result of a config refused before anything is allocated (its estimated memory
// exceeds the limit: oom-predicted), or nullopt when it may run.
std::optional<RunResult> refuse_before_running(const Config& config, const RunOptions& options);

// A config's model on its device in training mode, its synthetic batch and its optimizer:
// what every measurement (run, profile, memory) starts from. mode "torchscript" traces
// the loss (runner/torchscript.h).
struct TrainingSetup {
  std::unique_ptr<Workload> workload;
  Batch batch;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};
TrainingSetup prepare_training(const Config& config, torch::Device device, uint64_t seed,
                               const std::string& mode = "eager");

// Times one training step of an already built workload, for callers that drive
// their own loop (benchmarks): zero grads, forward, loss, backward, optimizer step.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& config,
                                                        torch::nn::Module& module);
// The config's optimizer over these tensors (a ZeRO shard rather than a module's parameters).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& config,
                                                        std::vector<torch::Tensor> params);
void train_step(Workload& w, torch::optim::Optimizer& opt, const Batch& batch,
                torch::Device device);

}  // namespace tb
