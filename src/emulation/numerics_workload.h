#pragma once
// Emulated number formats in any family's training step (a config's `numerics=` value,
// numerics/policy.h): the workload is wrapped so that each step
//   forward:   rounds the weights to their format (float32 masters kept aside) and, through
//              the family's activation points, the activations and their gradients;
//   backward:  the gradients of the (loss x scale) flow back through those points;
//   optimizer: restores the masters, rounds the (still scaled) weight gradients, unscales
//              them, skips the step on overflow under dynamic loss scaling, steps, then rounds
//              the optimizer state and the masters.
// What this measures is the cost of emulating the formats on this machine (and, run to
// accuracy, their effect on training); the formats' speed on hardware is simulate/'s job.
#include <map>
#include <memory>
#include <set>

#include "emulation/emulate.h"
#include "model/activation_point.h"
#include "model/workload.h"
#include "numerics/policy.h"

namespace tb::emu {

// A Policy holding the text policy's points; stochastic points draw from `seed`.
// Throws UsageError (an extension that will not load, ...).
Policy policy_from(const num::NumericsPolicy& text, uint64_t seed);

class NumericsWorkload : public Workload, private StepHooks {
 public:
  NumericsWorkload(std::unique_ptr<Workload> inner, Policy policy);
  torch::nn::Module& module() override { return inner_->module(); }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    return inner_->make_batch(device, dtype, seed);
  }
  torch::Tensor loss(const Batch& batch) override;
  torch::Tensor logits(const Batch& batch) override;
  int64_t examples_per_step() const override { return inner_->examples_per_step(); }
  double units_per_step() const override { return inner_->units_per_step(); }
  bool has_activation_points() const override { return inner_->has_activation_points(); }
  std::string activation_points_missing() const override {
    return inner_->activation_points_missing();
  }
  std::vector<std::vector<torch::Tensor>> layers() override { return inner_->layers(); }
  bool custom_step(torch::optim::Optimizer& opt, const Batch& batch) override;
  std::vector<torch::optim::Optimizer*> own_optimizers() override {
    return inner_->own_optimizers();
  }

  int64_t skipped_steps() const { return skipped_steps_; }  // overflows under dynamic scaling
  double loss_scale() const { return scale_.scale; }
  const Policy& policy() const { return policy_; }

 private:
  // Weights to their format for a forward pass, float32 masters kept in masters_; and back.
  void round_weights(std::vector<torch::Tensor>& params);
  void restore_weights(std::vector<torch::Tensor>& params);

  int layer_of(const torch::Tensor& param) const;

  // The step's two halves (StepHooks), for the runner's step and for a wrapped workload's
  // own: weights rounded for the forward pass, and the update (masters restored, gradients
  // rounded and unscaled, the step skipped on overflow, state and masters rounded).
  double before_forward(const std::vector<torch::Tensor>& weights) override;
  void step(torch::optim::Optimizer& opt) override;
  // The optimizer's step and the state's and masters' rounding fused (fused_update.h), where
  // the optimizer is momentum SGD the fused step computes exactly; false: nothing done.
  bool fused_sgd_step(torch::optim::Optimizer& opt);
  // None where the policy rounds no activation or error and replaces no operator: the
  // families then run their plain operators (nn::Transformer itself, fused recurrent cells).
  std::unique_ptr<ActivationHookScope> points() override {
    return installs_points_ ? std::make_unique<ActivationHookScope>(&hook_, &overrides_) : nullptr;
  }

  std::unique_ptr<Workload> inner_;
  Policy policy_;
  // Layers (Policy::layers, Workload::layers()) by their parameters.
  std::map<const void*, int> param_layer_;
  bool rounds_weights_ = false;
  bool installs_points_ = false;  // points(): a hook or an override does something
  num::LossScale scale_;
  ActivationHook hook_;
  std::vector<torch::Tensor> masters_;
  std::vector<torch::Tensor> rounded_;  // the weights before_forward rounded, until step()
  // Parameters whose masters a step has rounded: from then on, those whose masters are kept
  // in the weights' format skip the forward rounding (leaves_unchanged).
  std::set<const void*> in_format_;
  // layer: where the policy has a unit or an activation; recurrent (step-by-step cells,
  // unit_recurrent): there and where activations or errors are rounded; product: with a unit.
  Overrides overrides_;
  int64_t good_steps_ = 0, skipped_steps_ = 0;
};

// `inner` itself when the policy rounds nothing and scales no loss. Throws Unsupported when
// the policy needs what the workload lacks: activation points for activation/error formats,
// the runner's step (a workload with its own optimizers runs its own step). The policy's MAD
// unit and activation are emulate's own models' (UsageError here).
std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner, Policy policy);
std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner,
                                        const num::NumericsPolicy& policy, uint64_t seed);

}  // namespace tb::emu
