#pragma once
// The loop every emulated training run shares: a step on the next mini-batch, an evaluation on
// a fixed held-out set every K iterations, and DAWNBench's rule (the first evaluation at the
// target ends the run): test accuracy at or above `target`, or, with a loss target, validation
// loss at or below `target_loss`. What a step and an evaluation do is the task's business.
#include <functional>

#include "emulation/emulate.h"
#include "emulation/fashion_mnist.h"
#include "model/workload.h"

namespace tb::emu {

struct Learner {
  // One training step on a mini-batch of images [n, 1, 28, 28] and labels [n] (Fashion-MNIST).
  std::function<void(const torch::Tensor& images, const torch::Tensor& labels)> step;
  // Logits [n, 10] for test images (called under NoGradGuard).
  std::function<torch::Tensor(const torch::Tensor& images)> logits;
  // Filled into the SeedRun at the end (dynamic loss scaling), when given.
  std::function<int64_t()> skipped_steps;
  std::function<double()> loss_scale;
  // What the rounding points did on a counted step, taken after it; and whether the next step
  // is counted (EmulationOptions::count_every: by default the last before each evaluation).
  // When given.
  std::function<std::vector<ScalingSample>(int64_t iteration)> scaling;
  std::function<void(bool)> count;
};

// The rounding hooks (counts, scales, loss scaling) of a workload wrapped by with_numerics;
// nothing for another.
void hook_rounding(Learner& learner, Workload& w);

// Trains until the target or o.max_iters: `step` takes the run's next mini-batch and trains on
// it; `evaluate` scores the held-out set (accuracy, or loss with a loss target). The caller
// seeds the weights and the batch order.
SeedRun run_to_target(const EmulationOptions& o, uint64_t seed, Learner& learner,
                      const std::function<void()>& step, const std::function<double()>& evaluate,
                      const Progress& progress);

// Fashion-MNIST: shuffled mini-batches (the seed drives their order) through learner.step, the
// first o.eval_examples test images through learner.logits.
SeedRun train_to_target(const EmulationOptions& o, const Dataset& train, const Dataset& test,
                        uint64_t seed, Learner& learner, const Progress& progress);

}  // namespace tb::emu
