#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/activation_point.h"
#include "spec/config.h"
#include "spec/family.h"

namespace tb {

// One synthetic mini-batch, built once and reused for every timed step.
struct Batch {
  std::vector<torch::Tensor> inputs;
  torch::Tensor target;
};

// Emulated number formats inside a workload's own step (custom_step): the numerics wrapper
// sets them on the workload it wraps, whose custom step then calls each at its place.
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Before a forward pass that reads `weights`: they hold their emulated format until the
  // next step(). Returns the loss scale to multiply the loss by before backward.
  virtual double before_forward(const std::vector<torch::Tensor>& weights) = 0;
  // In place of opt.step(), after backward: the update under the emulated formats.
  virtual void step(torch::optim::Optimizer& opt) = 0;
  // The activation points and operator overrides, installed on the calling thread (the
  // step's, or an actor's) while the returned scope lives; null when there are none.
  virtual std::unique_ptr<ActivationHookScope> points() = 0;
};

// A trainable model with its data: the runner only calls these.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual torch::nn::Module& module() = 0;
  // Synthetic data, on the device and in the config's dtype.
  virtual Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) = 0;
  // Forward pass and loss (softmax cross-entropy for the generated families).
  virtual torch::Tensor loss(const Batch& batch) = 0;
  // The logits of a classifier family, so that accuracy can be measured on real data
  // (`emulate --model fc:...`); undefined where the family has none.
  virtual torch::Tensor logits(const Batch& batch) { return {}; }
  // Examples (sequences, images, episodes' frames...) consumed by one step.
  virtual int64_t examples_per_step() const = 0;
  // The family's throughput unit (FamilySchema::unit) consumed by one step: tokens for
  // translation, seconds of audio for speech, frames for reinforcement learning.
  virtual double units_per_step() const { return double(examples_per_step()); }

  // A step that is not "loss, backward, one optimizer step" (WGAN-GP's critic and
  // generator updates, A3C's asynchronous workers) is written here: return true after
  // doing the whole step, marking its parts with PhaseScope (model/phase.h). `opt` is the
  // runner's optimizer over module().parameters(); a workload may use its own instead.
  virtual bool custom_step(torch::optim::Optimizer& opt, const Batch& batch) { return false; }
  // Optimizers the workload owns (used by custom_step), so their state is counted as
  // optimizer state in memory breakdowns.
  virtual std::vector<torch::optim::Optimizer*> own_optimizers() { return {}; }
  // True when custom_step calls the StepHooks set here, if any, at every forward pass and
  // update, so that emulated number formats reach a workload's own step.
  virtual bool takes_step_hooks() const { return false; }
  void set_step_hooks(StepHooks* hooks) { step_hooks_ = hooks; }
  // True when the forward pass runs every Linear, Conv2d, activation, recurrent module and
  // product of two activations through model/activation_point.h, with a point on its
  // logits: emulated activation and error formats, processing units and activations
  // (Overrides) then reach all of them.
  virtual bool has_activation_points() const { return false; }
  // Why not, where the family can say more than that it was not written for them (the
  // operators of a user's TorchScript module that no point reaches).
  virtual std::string activation_points_missing() const { return {}; }
  // The layers that per-layer number formats (KEY.N) address, in order, each as its
  // parameters (weight first): by default the Linear and Conv2d modules in module().modules()
  // order.
  virtual std::vector<std::vector<torch::Tensor>> layers() {
    std::vector<std::vector<torch::Tensor>> out;
    for (const auto& m : module().modules())
      if (m->as<torch::nn::Linear>() || m->as<torch::nn::Conv2d>())
        out.push_back(m->parameters(/*recurse=*/false));
    return out;
  }

 protected:
  StepHooks* step_hooks_ = nullptr;
};

using WorkloadBuilder = std::function<std::unique_ptr<Workload>(const Config&)>;

// A family is its builder, registered by one call to this in model/<family>.cc, plus its
// schema and cost description, registered in cost/<family>.cc (which builds without
// LibTorch, so configs parse without it); nothing else needs to change.
void register_builder(const std::string& family, WorkloadBuilder builder);
std::unique_ptr<Workload> build_workload(const Config& config);
// The families with a builder, sorted; the family contracts check them against the schemas.
std::vector<std::string> families_with_builders();

torch::Dtype dtype_of(const Config& config);

}  // namespace tb
