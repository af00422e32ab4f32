#pragma once
// The loop every emulated training run shares: shuffled mini-batches of Fashion-MNIST, a test
// evaluation every K iterations, and DAWNBench's rule (the first evaluation at or above the
// target ends the run). What a step and an evaluation do is the model's business.
#include <functional>

#include "emulation/emulate.h"
#include "emulation/fashion_mnist.h"

namespace tb::emu {

struct Learner {
  // One training step on a mini-batch of images [n, 1, 28, 28] and labels [n].
  std::function<void(const torch::Tensor& images, const torch::Tensor& labels)> step;
  // Logits [n, 10] for test images (called under NoGradGuard).
  std::function<torch::Tensor(const torch::Tensor& images)> logits;
  // Filled into the SeedRun at the end (dynamic loss scaling), when given.
  std::function<int64_t()> skipped_steps;
  std::function<double()> loss_scale;
  // What the rounding points did on the counted steps since the last evaluation, taken at
  // each; and whether the next step is counted (the last before each evaluation). When given.
  std::function<std::vector<ScalingSample>(int64_t iteration)> scaling;
  std::function<void(bool)> count;
};

// Trains until the target or o.max_iters. The seed drives the batch order; the caller seeds
// the weights.
SeedRun train_to_target(const EmulationOptions& o, const Dataset& train, const Dataset& test,
                        uint64_t seed, Learner& learner, const Progress& progress);

}  // namespace tb::emu
