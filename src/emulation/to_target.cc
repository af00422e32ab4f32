#include "emulation/to_target.h"

#include <chrono>
#include <cmath>

#include "emulation/numerics_workload.h"

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

void hook_rounding(Learner& learner, Workload& w) {
  auto* emulated = dynamic_cast<NumericsWorkload*>(&w);
  if (!emulated) return;
  learner.skipped_steps = [emulated] { return emulated->skipped_steps(); };
  learner.loss_scale = [emulated] { return emulated->loss_scale(); };
  learner.scaling = [emulated](int64_t it) { return emulated->policy().take_scaling(it); };
  learner.count = [emulated](bool on) { emulated->policy().set_counting(on); };
}

SeedRun run_to_target(const EmulationOptions& o, uint64_t seed, Learner& learner,
                      const std::function<void()>& step, const std::function<double()>& evaluate,
                      const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool by_loss = o.target_loss > 0;
  SeedRun run;
  run.seed = seed;
  run.loss_target = by_loss;
  for (int64_t it = 1; it <= o.max_iters; ++it) {
    const bool evaluates = it % o.eval_every == 0 || it == o.max_iters;
    const bool counts = o.count_every > 0 ? it % o.count_every == 0 : evaluates;
    if (learner.count) learner.count(counts);
    step();
    if (learner.count) learner.count(false);
    if (counts && learner.scaling)
      for (auto& sample : learner.scaling(it)) run.scaling.push_back(std::move(sample));
    if (!evaluates) continue;
    const double value = evaluate();
    run.curve.push_back({it, value});
    if (by_loss && std::isfinite(value))
      run.best_loss = run.best_loss ? std::min(*run.best_loss, value) : value;
    else if (!by_loss)
      run.best_accuracy = std::max(run.best_accuracy, value);
    if (progress) progress(run, it, value);
    // DAWNBench: the first evaluation at the target. A NaN loss never reaches it.
    if (by_loss ? value <= o.target_loss : value >= o.target) {
      run.iterations = it;
      break;
    }
    if (by_loss && !std::isfinite(value)) break;  // diverged: it will not come back
  }
  if (learner.skipped_steps) run.skipped_steps = learner.skipped_steps();
  if (learner.loss_scale) run.final_loss_scale = learner.loss_scale();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

SeedRun train_to_target(const EmulationOptions& o, const Dataset& train, const Dataset& test,
                        uint64_t seed, Learner& learner, const Progress& progress) {
  const int64_t n = train.images.size(0);
  auto gen = at::detail::createCPUGenerator(seed);
  torch::Tensor order = torch::randperm(n, gen);
  int64_t cursor = 0;
  const auto step = [&] {
    if (cursor + o.batch > n) {
      order = torch::randperm(n, gen);
      cursor = 0;
    }
    const auto idx = order.slice(0, cursor, cursor + o.batch);
    cursor += o.batch;
    learner.step(train.images.index_select(0, idx), train.labels.index_select(0, idx));
  };
  return run_to_target(
      o, seed, learner, step, [&] { return accuracy(learner, test, o.eval_examples); }, progress);
}

}  // namespace tb::emu
