#include "emulation/numerics_workload.h"

#include <utility>

#include "base/errors.h"
#include "emulation/fused_update.h"
#include "emulation/hadamard.h"
#include "model/activation_point.h"
#include "model/phase.h"

namespace tb::emu {
namespace {

// The state tensors LibTorch's optimizers keep for one parameter.
std::vector<torch::Tensor> state_tensors(torch::optim::OptimizerParamState& state) {
  std::vector<torch::Tensor> out;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state)) {
    add(s->momentum_buffer());
  } else if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(&state)) {
    add(a->exp_avg());
    add(a->exp_avg_sq());
    add(a->max_exp_avg_sq());
  } else if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&state)) {
    add(a->exp_avg());
    add(a->exp_avg_sq());
    add(a->max_exp_avg_sq());
  } else if (auto* r = dynamic_cast<torch::optim::RMSpropParamState*>(&state)) {
    add(r->square_avg());
    add(r->momentum_buffer());
    add(r->grad_avg());
  }
  return out;
}

std::vector<torch::Tensor> params_of(torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> params;
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) params.push_back(p);
  return params;
}

}  // namespace

NumericsWorkload::NumericsWorkload(std::unique_ptr<Workload> inner, Policy policy)
    : inner_(std::move(inner)),
      policy_(std::move(policy)),
      scale_(num::parse_loss_scale(policy_.loss_scale)) {
  const auto layers = inner_->layers();
  for (size_t l = 0; l < layers.size(); ++l)
    for (const auto& p : layers[l]) param_layer_[p.unsafeGetTensorImpl()] = int(l);
  rounds_weights_ = policy_.weights.enabled();
  if (policy_.rht_size > 0 && policy_.has_unit())
    throw UsageError(policy_.str() +
                     ": rht and a unit both replace the Linear layers' GEMMs; choose one");
  const bool global_points = policy_.replaces_operators() || policy_.activations.enabled() ||
                             policy_.errors.enabled() || policy_.rht_size > 0;
  installs_points_ = global_points;
  for (const auto& [l, points] : policy_.layers) {
    rounds_weights_ = rounds_weights_ || (points[0] && points[0]->enabled());
    for (int i : {1, 2}) installs_points_ = installs_points_ || (points[i] && points[i]->enabled());
  }
  overrides_.tell_streams = [this] { return policy_.stream_positions(); };
  overrides_.seek_streams = [this](const std::vector<uint64_t>& p) { policy_.seek_streams(p); };
  // Recurrent modules run step by step when activations or errors are rounded too, so that
  // their formats reach the hidden states, not only the sequences going in and out.
  if (global_points) {
    overrides_.recurrent = [this](const torch::Tensor& x, const torch::Tensor& lengths,
                                  const RecurrentState& initial, torch::nn::Module& m) {
      return unit_recurrent(x, lengths, initial, m, policy_, [this](const torch::Tensor& t) {
        return quantize_op(t, policy_.activations, policy_.errors);
      });
    };
  }
  if (policy_.has_unit()) {
    overrides_.product = [this](const torch::Tensor& a, const torch::Tensor& b) {
      return unit_matmul(a, b, policy_);
    };
    overrides_.linear = [this](const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) { return unit_linear(x, w, b, policy_); };
    overrides_.conv2d = [this](const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b,
                               const ConvOptions& g) { return unit_conv2d(x, w, b, g, policy_); };
  }
  if (policy_.replaces_operators()) {
    overrides_.layer = [this](const torch::Tensor& x, torch::nn::Module& m) -> torch::Tensor {
      // The proposed activation stands in for the model's own, ReLU or ReLU6.
      if (policy_.activation != "relu" && (m.as<torch::nn::ReLU>() || m.as<torch::nn::ReLU6>()))
        return emulated_activation(x, policy_);
      if (!policy_.has_unit()) return {};
      if (auto* l = m.as<torch::nn::Linear>()) return unit_linear(x, l->weight, l->bias, policy_);
      if (auto* c = m.as<torch::nn::Conv2d>()) {
        const auto& o = c->options;
        ConvOptions shape;
        if (const auto* pad = c10::get_if<torch::ExpandingArray<2>>(&o.padding()))
          shape.pad = {(**pad)[0], (**pad)[1]};
        else if (!c10::get_if<torch::enumtype::kValid>(&o.padding()))
          throw Unsupported(policy_.str() +
                            ": the unit runs convolutions with explicit or "
                            "valid padding only, not 'same'");
        if (!c10::get_if<torch::enumtype::kZeros>(&o.padding_mode()))
          throw Unsupported(policy_.str() + ": the unit pads convolutions with zeros only");
        shape.stride = {(*o.stride())[0], (*o.stride())[1]};
        shape.dilation = {(*o.dilation())[0], (*o.dilation())[1]};
        shape.groups = o.groups();
        return unit_conv2d(x, c->weight, c->bias, shape, policy_);
      }
      return {};
    };
  }
  if (policy_.rht_size > 0) {
    // Linear layers round their own GEMM inputs (rht_linear); the hook leaves their input be.
    overrides_.linear = [this](const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
      return rht_linear(x, w, b, policy_, layer_of(w));
    };
    auto conv_or_unit = overrides_.layer;
    overrides_.layer = [this, conv_or_unit](const torch::Tensor& x,
                                            torch::nn::Module& m) -> torch::Tensor {
      if (auto* l = m.as<torch::nn::Linear>())
        return rht_linear(x, l->weight, l->bias, policy_, layer_of(l->weight));
      return conv_or_unit ? conv_or_unit(x, m) : torch::Tensor();
    };
  }
  hook_ = [this](const torch::Tensor& x, const torch::Tensor* weight) {
    if (policy_.rht_size > 0 && weight && weight->dim() == 2) return x;  // rht_linear's
    const int l = weight ? layer_of(*weight) : -1;
    return quantize_op(x, policy_.at(1, l), policy_.at(2, l));
  };
}

int NumericsWorkload::layer_of(const torch::Tensor& param) const {
  const auto it = param_layer_.find(param.unsafeGetTensorImpl());
  return it == param_layer_.end() ? -1 : it->second;
}

torch::Tensor NumericsWorkload::loss(const Batch& batch) {
  const auto scope = points();
  return inner_->loss(batch);
}

torch::Tensor NumericsWorkload::logits(const Batch& batch) {
  // Evaluated as trained: with the weights in their format and the scales training reached,
  // recording no amax into delayed scaling's histories.
  struct Recording {
    const Policy& p;
    explicit Recording(const Policy& p) : p(p) { p.set_recording(false); }
    ~Recording() { p.set_recording(true); }
  } recording(policy_);
  std::vector<torch::Tensor> params = inner_->module().parameters();
  round_weights(params);
  torch::Tensor out;
  {
    const auto scope = points();
    out = inner_->logits(batch);
  }
  restore_weights(params);
  return out;
}

void NumericsWorkload::round_weights(std::vector<torch::Tensor>& params) {
  if (!rounds_weights_) return;
  torch::NoGradGuard no_grad;
  // The parameters are pointed at rounded copies (set_data: no copy back and forth); the
  // optimizer and autograd hold the same parameter objects, so they see what the forward pass
  // used until restore_weights points them back at the masters.
  masters_.clear();
  for (auto& p : params) {
    masters_.push_back(p.data());
    const int l = layer_of(p);
    const QuantPoint& q = policy_.at(0, l);
    // Masters kept in the weights' format are already what rounding would give.
    if (in_format_.count(p.unsafeGetTensorImpl()) && leaves_unchanged(q, policy_.at(5, l)))
      continue;
    if (q.enabled()) p.set_data(q.apply(masters_.back()));
  }
}

void NumericsWorkload::restore_weights(std::vector<torch::Tensor>& params) {
  if (!rounds_weights_) return;
  for (size_t i = 0; i < params.size(); ++i) params[i].set_data(masters_[i]);
}

bool NumericsWorkload::custom_step(torch::optim::Optimizer& opt, const Batch& batch) {
  if (inner_->takes_step_hooks()) {
    // The workload's own step, with this wrapper's hooks at its forward passes and updates.
    struct Unset {
      Workload& w;
      ~Unset() { w.set_step_hooks(nullptr); }
    } unset{*inner_};
    inner_->set_step_hooks(this);
    return inner_->custom_step(opt, batch);
  }
  torch::Tensor loss;
  {
    PhaseScope phase(Phase::kForward);
    const double scale = before_forward(params_of(opt));
    loss = this->loss(batch);
    if (scale != 1) loss = loss * scale;
  }
  {
    PhaseScope phase(Phase::kBackward);
    loss.backward();
  }
  PhaseScope phase(Phase::kOptimizer);
  step(opt);
  return true;
}

double NumericsWorkload::before_forward(const std::vector<torch::Tensor>& weights) {
  if (rounded_.empty()) {  // the step's first forward pass
    policy_.begin_step();
    rounded_ = weights;
    round_weights(rounded_);
  }
  return scale_.scale;
}

void NumericsWorkload::step(torch::optim::Optimizer& opt) {
  const std::vector<torch::Tensor> params = params_of(opt);
  torch::NoGradGuard no_grad;
  if (!rounded_.empty()) {
    restore_weights(rounded_);
    rounded_.clear();
  }
  bool finite = true;
  for (auto& p : params) {
    if (!p.grad().defined()) continue;
    finite =
        policy_.at(3, layer_of(p)).round_unscale_(p.mutable_grad(), scale_.scale, scale_.dynamic) &&
        finite;
  }
  if (scale_.dynamic) {
    if (!finite) {
      scale_.scale /= 2;
      good_steps_ = 0;
      ++skipped_steps_;
      return;
    }
    if (++good_steps_ == 2000) {
      scale_.scale *= 2;
      good_steps_ = 0;
    }
  }
  if (fused_sgd_step(opt)) return;
  opt.step();
  for (auto& p : params) {
    const int l = layer_of(p);
    const QuantPoint& state = policy_.at(4, l);
    if (state.enabled()) {
      const auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it != opt.state().end())
        for (auto& t : state_tensors(*it->second)) state.apply_(t);
    }
    const QuantPoint& master = policy_.at(5, l);
    if (master.enabled()) {
      torch::Tensor data = p.data();
      master.apply_(data);
    }
    in_format_.insert(p.unsafeGetTensorImpl());
  }
}

bool NumericsWorkload::fused_sgd_step(torch::optim::Optimizer& opt) {
  if (!fused_updates() || !dynamic_cast<torch::optim::SGD*>(&opt)) return false;
  // What the fused step computes (MomentumRule::kTorchSgd); anything else is opt.step()'s. A
  // parameter's first step creates its buffer (a copy of the gradient): also opt.step()'s.
  const auto buffer_of = [&](const torch::Tensor& p) -> torch::Tensor {
    const auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    if (it == opt.state().end()) return {};
    return static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
  };
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    if (o.momentum() == 0 || o.dampening() != 0 || o.nesterov() || o.weight_decay() != 0)
      return false;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const int l = layer_of(p);
      const torch::Tensor buf = buffer_of(p);
      if (!buf.defined() ||
          !fuses_momentum_step(p.data(), buf, p.grad(), policy_.at(4, l), policy_.at(5, l)))
        return false;
    }
  }
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    for (auto& p : group.params()) {
      const int l = layer_of(p);
      const QuantPoint &state = policy_.at(4, l), &master = policy_.at(5, l);
      torch::Tensor data = p.data();
      if (p.grad().defined()) {
        torch::Tensor buf = buffer_of(p);
        momentum_step(MomentumRule::kTorchSgd, data, buf, p.grad(), o.momentum(), o.lr(), state,
                      master);
      } else {  // not stepped; rounded as the unfused step rounds every parameter
        torch::Tensor buf = buffer_of(p);
        if (buf.defined()) state.apply_(buf);
        master.apply_(data);
      }
      in_format_.insert(p.unsafeGetTensorImpl());
    }
  }
  return true;
}

Policy policy_from(const num::NumericsPolicy& text, uint64_t seed) {
  Policy p;
  const auto points = p.globals();
  const auto& keys = num::NumericsPolicy::kKeys;
  for (size_t i = 0; i < text.points.size(); ++i) {
    *points[i] = QuantPoint::parse(num::point_from_config(text.points[i]), seed);
    points[i]->set_item(std::string(keys[i]) + ":" + text.points[i]);
  }
  for (const auto& [layer, texts] : text.layers)
    for (size_t i = 0; i < texts.size(); ++i)
      if (!texts[i].empty()) {
        p.layers[layer][i] = QuantPoint::parse(num::point_from_config(texts[i]), seed);
        p.layers[layer][i]->set_item(std::string(keys[i]) + "." + std::to_string(layer) + ":" +
                                     texts[i]);
      }
  p.loss_scale = text.loss_scale;
  if (text.activation != "relu") p.set_activation(text.activation);
  if (!text.unit.empty()) p.set_unit(num::point_from_config(text.unit));
  if (!text.rht.empty()) {
    const num::Rht r = num::parse_rht(text.rht);
    p.rht_size = r.size;
    p.rht_seed = r.seed;
  }
  p.reseed(seed);
  return p;
}

std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner, Policy policy) {
  const bool operators = policy.replaces_operators();
  bool any = policy.loss_scale != "none" || operators || policy.rht_size > 0;
  for (const QuantPoint* q : std::as_const(policy).globals()) any = any || q->enabled();
  bool activations = policy.activations.enabled() || policy.errors.enabled() || policy.rht_size > 0;
  for (const auto& [layer, lp] : policy.layers)
    for (size_t i = 0; i < lp.size(); ++i) {
      any = any || (lp[i] && lp[i]->enabled());
      if (i == 1 || i == 2) activations = activations || (lp[i] && lp[i]->enabled());
    }
  if (!any) return inner;
  if (!inner->own_optimizers().empty() && !inner->takes_step_hooks())
    throw Unsupported(policy.str() +
                      ": this family runs its own training step, which does not apply emulated "
                      "formats");
  const std::string missing =
      inner->has_activation_points() ? "" : inner->activation_points_missing();
  if (operators && !inner->has_activation_points())
    throw Unsupported(
        policy.str() + ": this family's layers cannot run on an emulated unit or activation " +
        (missing.empty() ? "(docs/numerics.md lists those that can)" : "(" + missing + ")"));
  if (activations && !inner->has_activation_points())
    throw Unsupported(
        policy.str() + ": this family has no activation points " +
        (missing.empty() ? "(docs/numerics.md lists those that have)" : "(" + missing + ")") +
        "; round only weights, weight gradients, optimizer state and masters");
  return std::make_unique<NumericsWorkload>(std::move(inner), std::move(policy));
}

std::unique_ptr<Workload> with_numerics(std::unique_ptr<Workload> inner,
                                        const num::NumericsPolicy& policy, uint64_t seed) {
  if (policy.is_fp32()) return inner;
  return with_numerics(std::move(inner), policy_from(policy, seed));
}

}  // namespace tb::emu
