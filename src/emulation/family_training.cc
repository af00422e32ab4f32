#include "emulation/family_training.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "emulation/numerics_workload.h"
#include "emulation/to_target.h"

namespace tb::emu {
namespace {

torch::Tensor family_input(const Config& c, const torch::Tensor& images) {
  if (c.family() == "fc") return images.reshape({images.size(0), 784});
  return images.expand({images.size(0), 3, 28, 28}).contiguous();
}

}  // namespace

bool is_family_model(const std::string& model) { return model.find(':') != std::string::npos; }

Config fashion_mnist_family_config(const std::string& model, int64_t batch) {
  Config c = parse_config(model);
  auto need = [&](const std::string& key, const std::string& value) {
    if (c.get(key) != value)
      throw UsageError(fmt::format("model {}: {}={} (Fashion-MNIST needs {}={})", model, key,
                                   c.get(key), key, value));
  };
  if (c.family() == "fc") {
    need("input", "784");
  } else if (c.family() == "cnn") {
    need("image", "28");
  } else {
    throw UsageError("model " + model +
                     ": only the fc and cnn families train on Fashion-MNIST (or mlp, cnn)");
  }
  need("output", "10");
  need("dtype", "fp32");
  need("device", "cpu");
  need("workers", "1");
  need("numerics", "fp32");
  c.set("batch", std::to_string(batch));
  c.set("optimizer", "momentum");
  return c;
}

SeedRun train_family(const EmulationOptions& o, const Policy& given, const Dataset& train,
                     const Dataset& test, uint64_t seed, const Progress& progress) {
  const Config config = fashion_mnist_family_config(o.model, o.batch);
  torch::manual_seed(seed);
  Policy policy = given;
  policy.reseed(seed);
  std::unique_ptr<Workload> w = with_numerics(build_workload(config), std::move(policy));
  w->module().train();
  torch::optim::SGD opt(w->module().parameters(),
                        torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  auto* emulated = dynamic_cast<NumericsWorkload*>(w.get());
  Learner learner;
  learner.step = [&](const torch::Tensor& images, const torch::Tensor& labels) {
    const Batch b{{family_input(config, images)}, labels};
    for (auto& p : w->module().parameters()) p.mutable_grad().reset();
    if (w->custom_step(opt, b)) return;
    w->loss(b).backward();
    opt.step();
  };
  learner.logits = [&](const torch::Tensor& images) {
    // Batch-norm layers (cnn) evaluate with their running statistics.
    w->module().eval();
    const auto out = w->logits({{family_input(config, images)}, {}});
    w->module().train();
    return out;
  };
  if (emulated) {
    learner.skipped_steps = [&] { return emulated->skipped_steps(); };
    learner.loss_scale = [&] { return emulated->loss_scale(); };
    learner.scaling = [&](int64_t iteration) { return emulated->policy().take_scaling(iteration); };
    learner.count = [&](bool on) { emulated->policy().set_counting(on); };
  }
  return train_to_target(o, train, test, seed, learner, progress);
}

}  // namespace tb::emu
