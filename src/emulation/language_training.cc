#include "emulation/language_training.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "emulation/family_training.h"
#include "emulation/numerics_workload.h"
#include "emulation/to_target.h"

namespace tb::emu {

Config language_model_config(const std::string& model, int64_t batch) {
  Config c = parse_config(model);
  if (c.family() != "gpt")
    throw UsageError("model " + model + ": the language task trains the gpt family (gpt:...)");
  if (c.get("vocab") != "256")  // one token per byte
    throw UsageError(
        fmt::format("model {}: vocab={} (the language task needs vocab=256: one "
                    "token per byte)",
                    model, c.get("vocab")));
  fit_for_emulation(c, model, "the language task", batch, "adamw");
  return c;
}

SeedRun train_language(const EmulationOptions& o, const Policy& given, const TextCorpus& corpus,
                       uint64_t seed, const Progress& progress) {
  const Config config = language_model_config(o.model, o.batch);
  const int64_t seq = std::stoll(config.get("seq"));
  torch::manual_seed(seed);
  Policy policy = given;
  policy.reseed(seed);
  std::unique_ptr<Workload> w = with_numerics(build_workload(config), std::move(policy));
  w->module().train();
  torch::optim::AdamW opt(w->module().parameters(),
                          torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(0.1));
  // The causal mask and rotary tables of a synthetic batch; its tokens are replaced.
  Batch batch = w->make_batch(torch::kCPU, torch::kFloat32, seed);
  const torch::Tensor held_out =
      evenly_spaced_windows(corpus.validation, o.eval_examples, seq).to(torch::kLong);
  const torch::Tensor span = torch::arange(seq + 1, torch::kLong);
  auto gen = at::detail::createCPUGenerator(seed);
  const int64_t starts = corpus.train.size(0) - seq;
  const auto set_windows = [&](Batch& b, const torch::Tensor& windows) {
    b.inputs[0] = windows.slice(1, 0, seq).contiguous();
    b.target = windows.slice(1, 1, seq + 1).reshape({-1});
  };
  const auto step = [&] {
    const auto at = torch::randint(0, starts, {o.batch}, gen, torch::kLong);
    set_windows(batch, corpus.train.index({at.unsqueeze(1) + span}).to(torch::kLong));
    for (auto& p : w->module().parameters()) p.mutable_grad().reset();
    if (w->custom_step(opt, batch)) return;
    w->loss(batch).backward();
    opt.step();
  };
  // The mean cross-entropy of every held-out next byte, in batches of the training batch's
  // size; the load-balancing loss of a mixture of experts is not part of it.
  const auto evaluate = [&] {
    torch::NoGradGuard no_grad;
    w->module().eval();
    double sum = 0;
    Batch b = batch;
    for (int64_t i = 0; i < held_out.size(0); i += o.batch) {
      set_windows(b, held_out.slice(0, i, i + o.batch));
      const auto logits = w->logits(b);
      sum += torch::nn::functional::cross_entropy(
                 logits, b.target,
                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                 .item<double>();
    }
    w->module().train();
    return sum / double(held_out.size(0) * seq);
  };
  Learner learner;
  hook_rounding(learner, *w);
  return run_to_target(o, seed, learner, step, evaluate, progress);
}

}  // namespace tb::emu
