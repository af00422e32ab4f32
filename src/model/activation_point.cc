#include "model/activation_point.h"

namespace tb {
namespace {
thread_local const ActivationHook* current_hook = nullptr;
thread_local const LayerOverride* current_layers = nullptr;
thread_local const RecurrentOverride* current_recurrent = nullptr;
}  // namespace

torch::Tensor activation_point(const torch::Tensor& x) {
  return current_hook ? (*current_hook)(x, nullptr) : x;
}

torch::Tensor relu_op(const torch::Tensor& x, bool inplace) {
  if (current_layers) {
    static torch::nn::ReLU relu;  // stands for "a ReLU" to the override
    torch::Tensor y = (*current_layers)(x, *relu);
    if (y.defined()) return y;
  }
  return inplace ? x.relu_() : torch::relu(x);
}

torch::Tensor clipped_relu_op(const torch::Tensor& x, double ceiling) {
  if (current_layers) {
    static torch::nn::ReLU relu;  // a ReLU variant: the override's ReLU stands in for it
    torch::Tensor y = (*current_layers)(x, *relu);
    if (y.defined()) return y;
  }
  return torch::hardtanh(x, 0, ceiling);
}

namespace detail {
torch::Tensor enter_recurrent(const torch::Tensor& x, const torch::Tensor& lengths,
                              torch::nn::Module& m) {
  return current_recurrent ? (*current_recurrent)(x, lengths, m) : torch::Tensor();
}

torch::Tensor enter_layer(torch::Tensor& x, torch::nn::Module& m) {
  if (current_hook && (m.as<torch::nn::Linear>() || m.as<torch::nn::Conv2d>()))
    x = (*current_hook)(x, &m);
  return current_layers ? (*current_layers)(x, m) : torch::Tensor();
}
}  // namespace detail

torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x) {
  for (auto& m : *s) {
    torch::Tensor y = detail::enter_layer(x, *m.ptr());
    x = y.defined() ? y : m.forward(x);
  }
  return x;
}

ActivationHookScope::ActivationHookScope(const ActivationHook* hook, const LayerOverride* layers,
                                         const RecurrentOverride* recurrent)
    : previous_(current_hook),
      previous_layers_(current_layers),
      previous_recurrent_(current_recurrent) {
  current_hook = hook;
  current_layers = layers;
  current_recurrent = recurrent;
}

ActivationHookScope::~ActivationHookScope() {
  current_hook = previous_;
  current_layers = previous_layers_;
  current_recurrent = previous_recurrent_;
}

}  // namespace tb
