#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/workload.h"
#include "platform/description.h"
#include "record/profile.h"
#include "record/result.h"
#include "spec/config.h"

namespace tb {

struct ProfileOptions {
  int warmup_steps = 5;  // unprofiled steps first: allocations, optimizer state, caches settle
  int steps = 5;         // the profiled window
  uint64_t seed = 1;
  std::optional<PlatformDescription> platform;  // the peak for utilization
  std::optional<double> peak_flops;             // overrides the platform's
  bool keep_trace = false;                      // fill ProfileRun::trace
};

struct ProfileRun {
  Status status = Status::kOk;
  std::string error;
  int threads = 0;
  Profile profile;
  std::vector<TraceEvent> trace;  // every event of the window, for a Chrome trace
  // The profiled window's CPU tensor allocations served by the allocator underneath, and by
  // blocks its earlier steps freed (runner/block_cache.h): in a window of identical steps,
  // the first step's allocations only.
  uint64_t fresh_blocks = 0, reused_blocks = 0;
};

// One operator call as the profiler reports it, before aggregation.
struct OpEvent {
  std::string name;
  double start_us = 0, dur_us = 0;
  uint64_t tid = 0;
  bool user_scope = false;  // a RECORD_USER_SCOPE range (tb::step, tb::forward, ...)
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  double profiler_flops = 0;
  // Autograd's link from a backward node to the forward operator that made it: the forward
  // operator's sequence number on its thread (-1: none), and that thread (backward nodes).
  int64_t sequence_nr = -1;
  uint64_t fwd_tid = 0;
  // convolution_backward: which of (input, weight, bias) gradients the call computed, where it
  // was recorded (empty: unknown, and the cost assumes what the model's shapes say).
  std::vector<bool> output_mask;
};

// Aggregates a window of events into a profile: nests them per thread, attributes each
// to the phase whose tb::<phase> range contains it and to the model part (model/phase.h's
// PartScope) whose range contains it or its forward operator, computes self time and counts
// FLOPs and bytes once per operator tree. `steps` divides everything to per-step figures.
Profile aggregate_profile(const std::vector<OpEvent>& events, int steps);

// The cost of one training step counted by the profiler, for families without a cost
// description (a TorchScript file): FLOPs per phase and bytes as `profile` counts them (the
// cost model's conventions, the profiler's count where it has one), parameters and the
// memory the weights, gradients, optimizer state and inputs take. Runs one unprofiled step
// (optimizer state, the graph executor's first run) and one profiled step. source "profiler".
StepCost measured_step_cost(const Config& config, Workload& w, torch::optim::Optimizer& opt,
                            const Batch& batch, torch::Device device);
// The part of that cost no step is needed for: the memory of the trainable weights, their
// gradients and optimizer state, and the batch.
MemoryEstimate workload_memory_estimate(const Config& config, Workload& w, const Batch& batch);

// Builds the config's workload, runs warm-up steps, then profiles `steps` training steps
// with LibTorch's (Kineto) profiler. Problems of the run come back as a status.
ProfileRun profile_config(const Config& config, const ProfileOptions& options);

}  // namespace tb
