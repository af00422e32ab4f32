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

namespace {

void need(const Config& c, const std::string& model, const std::string& task,
          const std::string& key, const std::string& value) {
  if (c.get(key) != value)
    throw UsageError(
        fmt::format("model {}: {}={} ({} needs {}={})", model, key, c.get(key), task, key, value));
}

}  // namespace

void fit_for_emulation(Config& c, const std::string& model, const std::string& task, int64_t batch,
                       const std::string& optimizer) {
  need(c, model, task, "dtype", "fp32");
  need(c, model, task, "device", "cpu");
  need(c, model, task, "workers", "1");
  need(c, model, task, "numerics", "fp32");
  c.set("batch", std::to_string(batch));
  c.set("optimizer", optimizer);
}

Config fashion_mnist_family_config(const std::string& model, int64_t batch) {
  Config c = parse_config(model);
  const std::string task = "Fashion-MNIST";
  if (c.family() == "fc") {
    need(c, model, task, "input", "784");
  } else if (c.family() == "cnn") {
    need(c, model, task, "image", "28");
  } else {
    throw UsageError("model " + model +
                     ": only the fc and cnn families train on Fashion-MNIST (or mlp, cnn)");
  }
  need(c, model, task, "output", "10");
  fit_for_emulation(c, model, task, batch, "momentum");
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
  hook_rounding(learner, *w);
  return train_to_target(o, train, test, seed, learner, progress);
}

}  // namespace tb::emu
