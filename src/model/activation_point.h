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

// x itself when no hook is installed on this thread.
torch::Tensor activation_point(const torch::Tensor& x);

// Runs a Sequential with an activation point before every Linear and Conv2d in it.
torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x);

// Installs a hook on this thread for its lifetime (the forward pass runs on the calling
// thread; intra-op workers never call module code).
class ActivationHookScope {
 public:
  explicit ActivationHookScope(const ActivationHook* hook);
  ~ActivationHookScope();
  ActivationHookScope(const ActivationHookScope&) = delete;
  ActivationHookScope& operator=(const ActivationHookScope&) = delete;

 private:
  const ActivationHook* previous_;
};

}  // namespace tb
