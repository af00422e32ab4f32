#include "emulation/numerics_workload.h"

#include "model/activation_point.h"
#include "model/phase.h"
#include "spec/errors.h"

namespace tb::emu {
namespace {

// Every state tensor LibTorch's optimizers keep per parameter.
std::vector<torch::Tensor> state_tensors(torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  for (auto& [key, state] : opt.state()) {
    if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(state.get())) {
      add(s->momentum_buffer());
    } else if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(state.get())) {
      add(a->exp_avg());
      add(a->exp_avg_sq());
      add(a->max_exp_avg_sq());
    } else if (auto* r = dynamic_cast<torch::optim::RMSpropParamState*>(state.get())) {
      add(r->square_avg());
      add(r->momentum_buffer());
      add(r->grad_avg());
    }
  }
  return out;
}

}  // namespace

NumericsWorkload::NumericsWorkload(std::unique_ptr<Workload> inner, Policy policy)
    : inner_(std::move(inner)),
      policy_(std::move(policy)),
      scale_(num::parse_loss_scale(policy_.loss_scale)) {
  hook_ = [this](const torch::Tensor& x) {
    return quantize_op(x, policy_.activations, policy_.errors);
  };
}

torch::Tensor NumericsWorkload::loss(const Batch& batch) {
  ActivationHookScope scope(&hook_);
  return inner_->loss(batch);
}

torch::Tensor NumericsWorkload::logits(const Batch& batch) {
  // Evaluated as trained: with the weights in their format.
  std::vector<torch::Tensor> params = inner_->module().parameters();
  round_weights(params);
  torch::Tensor out;
  {
    ActivationHookScope scope(&hook_);
    out = inner_->logits(batch);
  }
  restore_weights(params);
  return out;
}

void NumericsWorkload::round_weights(std::vector<torch::Tensor>& params) {
  if (!policy_.weights.enabled()) return;
  torch::NoGradGuard no_grad;
  // The parameters are pointed at rounded copies (set_data: no copy back and forth); the
  // optimizer and autograd hold the same parameter objects, so they see what the forward pass
  // used until restore_weights points them back at the masters.
  masters_.clear();
  for (auto& p : params) {
    masters_.push_back(p.data());
    p.set_data(policy_.weights.apply(masters_.back()));
  }
}

void NumericsWorkload::restore_weights(std::vector<torch::Tensor>& params) {
  if (!policy_.weights.enabled()) return;
  for (size_t i = 0; i < params.size(); ++i) params[i].set_data(masters_[i]);
}

bool NumericsWorkload::custom_step(torch::optim::Optimizer& opt, const Batch& batch) {
  std::vector<torch::Tensor> params;
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) params.push_back(p);
  torch::Tensor loss;
  {
    PhaseScope phase(Phase::kForward);
    round_weights(params);
    loss = this->loss(batch);
    if (scale_.scale != 1) loss = loss * scale_.scale;
  }
  {
    PhaseScope phase(Phase::kBackward);
    loss.backward();
  }
  PhaseScope phase(Phase::kOptimizer);
  torch::NoGradGuard no_grad;
  restore_weights(params);
  std::vector<torch::Tensor> grads;
  for (auto& p : params)
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  for (auto& g : grads) {
    policy_.weight_grads.apply_(g);
    if (scale_.scale != 1) g.div_(scale_.scale);
  }
  if (scale_.dynamic) {
    if (!grads_finite(params)) {
      scale_.scale /= 2;
      good_steps_ = 0;
      ++skipped_steps_;
      return true;
    }
    if (++good_steps_ == 2000) {
      scale_.scale *= 2;
      good_steps_ = 0;
    }
  }
  opt.step();
  if (policy_.optimizer_state.enabled())
    for (auto& t : state_tensors(opt)) policy_.optimizer_state.apply_(t);
  if (policy_.master.enabled())
    for (auto& p : params) {
      torch::Tensor data = p.data();
      policy_.master.apply_(data);
    }
  return true;
}

Policy policy_from(const num::NumericsPolicy& text, uint64_t seed) {
  Policy p;
  QuantPoint* points[] = {&p.weights,      &p.activations,     &p.errors,
                          &p.weight_grads, &p.optimizer_state, &p.master};
  for (size_t i = 0; i < text.points.size(); ++i)
    *points[i] = QuantPoint::parse(num::point_from_config(text.points[i]), seed);
  p.loss_scale = text.loss_scale;
  p.reseed(seed);
  return p;
}

std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner, Policy policy) {
  if (policy.mad || policy.ext_unit || policy.activation != "relu")
    throw UsageError("a MAD unit or an approximate activation works in emulate's mlp and cnn "
                     "models only, not in a family's layers");
  const QuantPoint* points[] = {&policy.weights,      &policy.activations,
                                &policy.errors,       &policy.weight_grads,
                                &policy.optimizer_state, &policy.master};
  bool any = policy.loss_scale != "none";
  for (const QuantPoint* q : points) any = any || q->enabled();
  if (!any) return inner;
  if (!inner->own_optimizers().empty())
    throw Unsupported(policy.str() +
                      ": this family runs its own training step, which does not apply emulated "
                      "formats");
  if ((policy.activations.enabled() || policy.errors.enabled()) && !inner->has_activation_points())
    throw Unsupported(policy.str() +
                      ": this family has no activation points (fc, cnn and rnn have); round "
                      "only weights, weight gradients, optimizer state and masters");
  return std::make_unique<NumericsWorkload>(std::move(inner), std::move(policy));
}

std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner,
                                        const num::NumericsPolicy& policy, uint64_t seed) {
  if (policy.is_fp32()) return inner;
  return with_numerics(std::move(inner), policy_from(policy, seed));
}

}  // namespace tb::emu
