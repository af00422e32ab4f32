#include "model/activation_point.h"

namespace tb {
namespace {
thread_local const ActivationHook* current_hook = nullptr;
thread_local const Overrides* current = nullptr;

// The override's stand-in for "a ReLU" (also a clipped one).
torch::Tensor overridden_relu(const torch::Tensor& x) {
  if (!current || !current->layer) return {};
  static torch::nn::ReLU relu;
  return current->layer(x, *relu);
}
}  // namespace

torch::Tensor activation_point(const torch::Tensor& x) {
  return current_hook ? (*current_hook)(x, nullptr) : x;
}

torch::Tensor relu_op(const torch::Tensor& x, bool inplace) {
  torch::Tensor y = overridden_relu(x);
  if (y.defined()) return y;
  return inplace ? x.relu_() : torch::relu(x);
}

torch::Tensor clipped_relu_op(const torch::Tensor& x, double ceiling) {
  torch::Tensor y = overridden_relu(x);
  return y.defined() ? y : torch::hardtanh(x, 0, ceiling);
}

torch::Tensor product_op(torch::Tensor a, torch::Tensor b) {
  a = activation_point(a);
  b = activation_point(b);
  if (current && current->product) {
    torch::Tensor y = current->product(a, b);
    if (y.defined()) return y;
  }
  // bmm itself where it is one, so that profiles name the operator the family used to call.
  return a.dim() == 3 && b.dim() == 3 ? torch::bmm(a, b) : torch::matmul(a, b);
}

torch::Tensor linear_op(torch::Tensor x, const torch::Tensor& w, const torch::Tensor& b) {
  if (current_hook) x = (*current_hook)(x, &w);
  if (current && current->linear) {
    torch::Tensor y = current->linear(x, w, b);
    if (y.defined()) return y;
  }
  return torch::nn::functional::linear(x, w, b);
}

torch::Tensor conv2d_op(torch::Tensor x, const torch::Tensor& w, const torch::Tensor& b,
                        const ConvOptions& g, const torch::Tensor* layer) {
  if (current_hook) x = (*current_hook)(x, layer ? layer : &w);
  if (current && current->conv2d) {
    torch::Tensor y = current->conv2d(x, w, b, g);
    if (y.defined()) return y;
  }
  return torch::conv2d(x, w, b, g.stride, g.pad, g.dilation, g.groups);
}

bool points_installed() { return current_hook != nullptr || current != nullptr; }

namespace detail {
torch::Tensor enter_layer(torch::Tensor& x, torch::nn::Module& m) {
  if (current_hook) {
    if (auto* l = m.as<torch::nn::Linear>()) x = (*current_hook)(x, &l->weight);
    if (auto* c = m.as<torch::nn::Conv2d>()) x = (*current_hook)(x, &c->weight);
  }
  return current && current->layer ? current->layer(x, m) : torch::Tensor();
}

RecurrentResult enter_recurrent(const torch::Tensor& x, const torch::Tensor& lengths,
                                const RecurrentState& initial, torch::nn::Module& m) {
  return current && current->recurrent ? current->recurrent(x, lengths, initial, m)
                                       : RecurrentResult{};
}
}  // namespace detail

RecurrentLayersImpl::RecurrentLayersImpl(torch::nn::detail::RNNOptionsBase o,
                                         const std::vector<torch::Tensor>& params, bool training,
                                         bool is_cell)
    : options(std::move(o)), cell(is_cell) {
  const int directions = options.bidirectional() ? 2 : 1;
  size_t i = 0;
  for (int64_t l = 0; l < options.num_layers(); ++l)
    for (int d = 0; d < directions; ++d) {
      const std::string suffix = cell ? "" : "_l" + std::to_string(l) + (d ? "_reverse" : "");
      for (const char* name : {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"}) {
        if (name[0] == 'b' && !options.bias()) continue;
        if (std::string(name) == "weight_hr" && options.proj_size() == 0) continue;
        TORCH_CHECK(i < params.size(), "recurrent layers: too few parameters");
        register_parameter(name + suffix, params[i], params[i].requires_grad());
        ++i;
      }
    }
  TORCH_CHECK(i == params.size(), "recurrent layers: ", params.size(), " parameters, expected ", i);
  train(training);
}

RecurrentResult recurrent_layers_op(const torch::Tensor& x, const torch::Tensor& lengths,
                                    const RecurrentState& initial, RecurrentLayersImpl& m) {
  return detail::enter_recurrent(x, lengths, initial, m);
}

torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x) {
  for (auto& m : *s) {
    torch::Tensor y = detail::enter_layer(x, *m.ptr());
    x = y.defined() ? y : m.forward(x);
  }
  return x;
}

ActivationHookScope::ActivationHookScope(const ActivationHook* hook, const Overrides* overrides)
    : previous_(current_hook), previous_overrides_(current) {
  current_hook = hook;
  current = overrides;
}

ActivationHookScope::~ActivationHookScope() {
  current_hook = previous_;
  current = previous_overrides_;
}

PointsReplay::PointsReplay() : hook_(current_hook), overrides_(current) {
  if (overrides_ && overrides_->tell_streams) positions_ = overrides_->tell_streams();
}

PointsReplay::Scope::Scope(const PointsReplay& replay)
    : points_(replay.hook_, replay.overrides_), overrides_(replay.overrides_) {
  if (overrides_ && overrides_->tell_streams) {
    resume_ = overrides_->tell_streams();
    overrides_->seek_streams(replay.positions_);
  }
}

PointsReplay::Scope::~Scope() {
  if (overrides_ && overrides_->seek_streams) overrides_->seek_streams(resume_);
}

}  // namespace tb
