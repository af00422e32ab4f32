#include "emulation/to_target.h"

#include <chrono>

namespace tb::emu {
namespace {

double accuracy(Learner& learner, const Dataset& test, int64_t examples) {
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t i = 0; i < examples; i += 1000) {
    const int64_t n = std::min<int64_t>(1000, examples - i);
    const auto logits = learner.logits(test.images.slice(0, i, i + n));
    correct += logits.argmax(1).eq(test.labels.slice(0, i, i + n)).sum().item<int64_t>();
  }
  return double(correct) / double(examples);
}

}  // namespace

SeedRun train_to_target(const EmulationOptions& o, const Dataset& train, const Dataset& test,
                        uint64_t seed, Learner& learner, const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  SeedRun run;
  run.seed = seed;
  const int64_t n = train.images.size(0);
  auto gen = at::detail::createCPUGenerator(seed);
  torch::Tensor order = torch::randperm(n, gen);
  int64_t cursor = 0;
  for (int64_t it = 1; it <= o.max_iters; ++it) {
    if (cursor + o.batch > n) {
      order = torch::randperm(n, gen);
      cursor = 0;
    }
    const auto idx = order.slice(0, cursor, cursor + o.batch);
    cursor += o.batch;
    // What rounding did is counted on the last step before each evaluation: a sample of the
    // steps, since counting costs more than rounding.
    const bool evaluates = it % o.eval_every == 0 || it == o.max_iters;
    if (learner.count) learner.count(evaluates);
    learner.step(train.images.index_select(0, idx), train.labels.index_select(0, idx));
    if (learner.count) learner.count(false);
    if (evaluates) {
      if (learner.scaling)
        for (auto& sample : learner.scaling(it)) run.scaling.push_back(std::move(sample));
      const double acc = accuracy(learner, test, o.eval_examples);
      run.curve.push_back({it, acc});
      run.best_accuracy = std::max(run.best_accuracy, acc);
      if (progress) progress(run, it, acc);
      if (acc >= o.target) {  // DAWNBench: the first evaluation at or above the target
        run.iterations = it;
        break;
      }
    }
  }
  if (learner.skipped_steps) run.skipped_steps = learner.skipped_steps();
  if (learner.loss_scale) run.final_loss_scale = learner.loss_scale();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace tb::emu
