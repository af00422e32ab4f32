#pragma once
// Where an emulated number format may round a family's activations (and, in backward, the
// gradients flowing back through them): the input of every Linear and Conv2d and the logits.
// Families call these at those places; they cost nothing unless emulation/ installs a hook
// for the duration of a forward pass (ActivationHookScope).
#include <torch/torch.h>

#include <functional>

namespace tb {

// x and the Linear or Conv2d module it is the input of (null: the logits, or a point that is
// no layer's input).
using ActivationHook =
    std::function<torch::Tensor(const torch::Tensor&, const torch::nn::Module* layer)>;

// Replaces a layer's own computation (emulation's custom processing unit for Linear and
// Conv2d, an approximate activation for ReLU): the layer's output for input x, or an undefined
// tensor to run the layer as it is.
using LayerOverride = std::function<torch::Tensor(const torch::Tensor& x, torch::nn::Module& layer)>;

// x itself when no hook is installed on this thread.
torch::Tensor activation_point(const torch::Tensor& x);

// relu(x) (in place when `inplace`, as torchvision's models do it), or what an installed
// override puts in a ReLU's place. For a family's ReLUs that are not modules (functional
// relu in a forward method, a residual block's last one).
torch::Tensor relu_op(const torch::Tensor& x, bool inplace = false);

namespace detail {
// Passes x through layer m's activation point (m a Linear or Conv2d) and returns what the
// installed override computes for m, or an undefined tensor.
torch::Tensor enter_layer(torch::Tensor& x, torch::nn::Module& m);
}  // namespace detail

// One module called by a family's forward method rather than by forward_with_points
// (torch::nn::Conv2d, Linear, ReLU6, ...): its activation point, then the override's output
// or the module's own forward.
template <typename Holder>
torch::Tensor layer_op(Holder& m, torch::Tensor x) {
  torch::Tensor y = detail::enter_layer(x, *m);
  return y.defined() ? y : m->forward(x);
}

// Runs a Sequential with an activation point before every Linear and Conv2d in it, and each
// module through the installed override, if any.
torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x);

// Installs a hook on this thread for its lifetime (the forward pass runs on the calling
// thread; intra-op workers never call module code).
class ActivationHookScope {
 public:
  explicit ActivationHookScope(const ActivationHook* hook, const LayerOverride* layers = nullptr);
  ~ActivationHookScope();
  ActivationHookScope(const ActivationHookScope&) = delete;
  ActivationHookScope& operator=(const ActivationHookScope&) = delete;

 private:
  const ActivationHook* previous_;
  const LayerOverride* previous_layers_;
};

}  // namespace tb
