#pragma once
// Which of a workload's layers one forward pass runs through the activation points
// (model/activation_point.h), and which conv, linear, ReLU and recurrent operators escape them:
// for the tests that check a family's numerics= coverage.
#include <torch/torch.h>

#include <optional>
#include <set>
#include <string>

#include "model/activation_point.h"
#include "model/workload.h"

namespace tb::testing {

// What one forward pass showed of a model's layers: the Linear/Conv2d modules that reached
// the activation hook and the override, and the conv, linear and ReLU operators that ran
// outside the override (which must be none).
struct Coverage {
  std::set<const void*> hooked;  // the layers' weights
  std::set<const torch::nn::Module*> overridden;
  int64_t activations = 0;  // ReLU and ReLU6 calls the override saw
  int64_t products = 0;     // products of two activations
  std::multiset<std::string> escaped;
};

inline thread_local bool t_in_override = false;
inline thread_local Coverage* t_coverage = nullptr;

inline thread_local int t_backward_depth = 0;

inline std::unique_ptr<at::ObserverContext> count_escape(const at::RecordFunction& fn) {
  // Linear runs as addmm (or matmul), ReLU6 as hardtanh.
  static const std::set<std::string> watched = {
      "aten::conv2d",    "aten::convolution",   "aten::linear",
      "aten::addmm",     "aten::matmul",        "aten::mm",
      "aten::relu",      "aten::relu_",         "aten::hardtanh",
      "aten::hardtanh_", "aten::lstm",          "aten::gru",
      "aten::rnn_tanh",  "aten::rnn_relu",      "aten::lstm_cell",
      "aten::gru_cell",  "aten::rnn_tanh_cell", "aten::rnn_relu_cell",
      "aten::bmm"};
  // Operators inside an autograd node (WGAN-GP's penalty differentiates in its forward pass)
  // are the backward of forward operators already seen, not forward operators of their own.
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ++t_backward_depth;
    return nullptr;
  }
  if (t_coverage && !t_in_override && t_backward_depth == 0 && watched.count(fn.name()))
    t_coverage->escaped.insert(fn.name());
  return nullptr;
}

inline void end_escape(const at::RecordFunction& fn, at::ObserverContext*) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) --t_backward_depth;
}

// Runs one forward pass with a hook and an override that run each layer as it is, marking
// what they see; with `install` false, neither is installed (the escapes are then all the
// model's layers, which shows that the operator callback sees them).
inline Coverage forward_coverage(Workload& w, const Batch& b, bool install) {
  Coverage c;
  w.module().train();
  const ActivationHook hook = [&](const torch::Tensor& x, const torch::Tensor* weight) {
    if (weight) c.hooked.insert(weight->unsafeGetTensorImpl());
    return x;
  };
  Overrides overrides;
  overrides.layer = [&](const torch::Tensor& x, torch::nn::Module& m) {
    t_in_override = true;
    torch::Tensor y;
    if (auto* l = m.as<torch::nn::Linear>()) y = l->forward(x);
    if (auto* k = m.as<torch::nn::Conv2d>()) y = k->forward(x);
    if (y.defined()) c.overridden.insert(&m);
    if (auto* r = m.as<torch::nn::ReLU>()) y = r->forward(x), ++c.activations;
    if (auto* r = m.as<torch::nn::ReLU6>()) y = r->forward(x), ++c.activations;
    t_in_override = false;
    return y;
  };
  // Recurrent modules are replaced whole; their packed inputs need not be reproduced here.
  overrides.recurrent = [&](const torch::Tensor& x, const torch::Tensor& lengths,
                            const RecurrentState& initial, torch::nn::Module& m) {
    c.overridden.insert(&m);
    t_in_override = true;
    RecurrentResult r;
    if (auto* l = m.as<torch::nn::LSTM>()) {
      auto [out, state] = l->forward(x);
      r = {out, {std::get<0>(state), std::get<1>(state)}};
    }
    if (auto* g = m.as<torch::nn::GRU>()) r.output = std::get<0>(g->forward(x));
    if (auto* n = m.as<torch::nn::RNN>()) r.output = std::get<0>(n->forward(x));
    if (auto* l = m.as<torch::nn::LSTMCell>()) {
      auto [h, cell] = l->forward(x, std::make_tuple(initial.h, initial.c));
      r = {h, {h, cell}};
    }
    t_in_override = false;
    return r;
  };
  overrides.product = [&](const torch::Tensor& a, const torch::Tensor& b) {
    ++c.products;
    t_in_override = true;
    auto y = torch::matmul(a, b);
    t_in_override = false;
    return y;
  };
  overrides.linear = [&](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    t_in_override = true;
    auto y = torch::nn::functional::linear(x, w, b);
    t_in_override = false;
    return y;
  };
  t_coverage = &c;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&count_escape, &end_escape)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  {
    // Grad mode on: WGAN-GP's loss differentiates its critic inside.
    std::optional<ActivationHookScope> scope;
    if (install) scope.emplace(&hook, &overrides);
    w.loss(b);
  }
  at::removeCallback(handle);
  t_coverage = nullptr;
  return c;
}

// A workload's Linear and Conv2d modules (with their weights) and its recurrent modules: what
// the activation points must reach.
struct PointLayers {
  std::set<const torch::nn::Module*> layers, recurrent;
  std::set<const void*> weights;
};
inline PointLayers point_layers(Workload& w) {
  PointLayers p;
  for (const auto& m : w.module().modules()) {
    if (m->as<torch::nn::Linear>() || m->as<torch::nn::Conv2d>()) {
      p.layers.insert(m.get());
      p.weights.insert(m->named_parameters(false)["weight"].unsafeGetTensorImpl());
    }
    if (m->as<torch::nn::LSTM>() || m->as<torch::nn::GRU>() || m->as<torch::nn::RNN>() ||
        m->as<torch::nn::LSTMCell>())
      p.recurrent.insert(m.get());
  }
  return p;
}

}  // namespace tb::testing
