#pragma once
#include <torch/torch.h>

#include <string>

#include "record/memory.h"
#include "record/result.h"
#include "spec/config.h"

namespace tb {

struct MemoryOptions {
  int warmup_steps = 2;  // the first step creates the optimizer state; the next is steady
  uint64_t seed = 1;
  size_t max_timeline_points = 400;
};

struct MemoryRun {
  Status status = Status::kOk;
  std::string error;
  MemoryBreakdown breakdown;
};

// Builds the config's workload under the counting allocator, runs the warm-up steps, and
// records one training step: every allocation, its owner and the phase it lived in.
MemoryRun measure_memory(const Config& config, const MemoryOptions& options);

// The tensors an optimizer holds now (LibTorch's RMSprop: square_avg and, with momentum,
// momentum_buffer; Adam and AdamW: exp_avg, exp_avg_sq; SGD with momentum: momentum_buffer):
// what the optimizer-state category counts.
std::vector<torch::Tensor> optimizer_state(torch::optim::Optimizer& opt);

}  // namespace tb
