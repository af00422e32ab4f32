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

// Replaces a recurrent module's forward (emulation's step-by-step cells): the output sequence
// for x [length, batch, features] (batch-first modules: [batch, length, features]) whose
// sequences have `lengths` (on the CPU; undefined: every sequence is full), zero beyond each
// sequence's end; or an undefined tensor to run the module as it is.
using RecurrentOverride = std::function<torch::Tensor(
    const torch::Tensor& x, const torch::Tensor& lengths, torch::nn::Module& cells)>;

// x itself when no hook is installed on this thread.
torch::Tensor activation_point(const torch::Tensor& x);

// relu(x) (in place when `inplace`, as torchvision's models do it), or what an installed
// override puts in a ReLU's place. For a family's ReLUs that are not modules (functional
// relu in a forward method, a residual block's last one).
torch::Tensor relu_op(const torch::Tensor& x, bool inplace = false);
// min(relu(x), ceiling) (Deep Speech 2's clipped ReLU), or the override's ReLU.
torch::Tensor clipped_relu_op(const torch::Tensor& x, double ceiling);

namespace detail {
// Passes x through layer m's activation point (m a Linear or Conv2d) and returns what the
// installed override computes for m, or an undefined tensor.
torch::Tensor enter_layer(torch::Tensor& x, torch::nn::Module& m);
torch::Tensor enter_recurrent(const torch::Tensor& x, const torch::Tensor& lengths,
                              torch::nn::Module& m);
}  // namespace detail

// One module called by a family's forward method rather than by forward_with_points
// (torch::nn::Conv2d, Linear, ReLU6, ...): its activation point, then the override's output
// or the module's own forward.
template <typename Holder>
torch::Tensor layer_op(Holder& m, torch::Tensor x) {
  torch::Tensor y = detail::enter_layer(x, *m);
  return y.defined() ? y : m->forward(x);
}

// The output sequence of a recurrent module (torch::nn::RNN, LSTM, GRU) run without an
// initial state on x, padded sequences of `lengths` (CPU, longest first) or all full: what
// the installed RecurrentOverride computes (the cells one step at a time, emulated), or the
// module's own fused forward (on packed sequences where lengths are given).
template <typename Holder>
torch::Tensor recurrent_op(Holder& m, const torch::Tensor& x, const torch::Tensor& lengths = {}) {
  torch::Tensor y = detail::enter_recurrent(x, lengths, *m);
  if (y.defined()) return y;
  if (!lengths.defined()) return std::get<0>(m->forward(x));
  namespace rnn_utils = torch::nn::utils::rnn;
  const bool batch_first = m->options.batch_first();
  const auto packed = rnn_utils::pack_padded_sequence(x, lengths, batch_first);
  const auto out = std::get<0>(m->forward_with_packed_input(packed));
  return std::get<0>(rnn_utils::pad_packed_sequence(out, batch_first, 0.0, x.size(batch_first)));
}

// Runs a Sequential with an activation point before every Linear and Conv2d in it, and each
// module through the installed override, if any.
torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x);

// Installs a hook on this thread for its lifetime (the forward pass runs on the calling
// thread; intra-op workers never call module code).
class ActivationHookScope {
 public:
  explicit ActivationHookScope(const ActivationHook* hook, const LayerOverride* layers = nullptr,
                               const RecurrentOverride* recurrent = nullptr);
  ~ActivationHookScope();
  ActivationHookScope(const ActivationHookScope&) = delete;
  ActivationHookScope& operator=(const ActivationHookScope&) = delete;

 private:
  const ActivationHook* previous_;
  const LayerOverride* previous_layers_;
  const RecurrentOverride* previous_recurrent_;
};

}  // namespace tb
