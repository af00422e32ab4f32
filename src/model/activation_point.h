#pragma once
// Where an emulated number format may round a family's activations (and, in backward, the
// gradients flowing back through them), and where emulated operators may stand in for the
// family's own: every Linear, Conv2d, activation, recurrent module and activation-by-
// activation product, and the logits. Families call these at those places; they cost nothing
// unless emulation/ installs a hook and overrides for the duration of a forward pass
// (ActivationHookScope).
#include <torch/torch.h>

#include <array>
#include <functional>

namespace tb {

// x and the weight of the layer it is the input of: a Linear or Conv2d module's, or the one
// given to linear_op or conv2d_op (null: the logits, or a point that is no layer's input).
// Weights identify layers, so that a layer need not be a LibTorch module (a TorchScript
// module's layers are not).
using ActivationHook =
    std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor* weight)>;

// The options of a 2-D convolution call, as torch::conv2d takes them (the shapes come with
// its tensors; cost/layers.h's ConvGeometry is the whole layer's).
struct ConvOptions {
  std::array<int64_t, 2> stride{1, 1}, pad{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

// A recurrent module's state: hidden and (LSTM) cell state; [layers x directions, batch,
// hidden] for RNN, LSTM and GRU modules, [batch, hidden] for their cells. Undefined: zeros.
struct RecurrentState {
  torch::Tensor h, c;
};
struct RecurrentResult {
  torch::Tensor output;  // the output sequence (a cell: its new hidden state)
  RecurrentState state;  // the final state
};

// A stacked recurrent module or a cell that is no LibTorch module (a TorchScript module's
// aten::lstm, gru, rnn_tanh, rnn_relu or their _cell): its options, and its parameters (the
// caller's tensors, so that gradients reach them) registered under LibTorch's names
// (weight_ih_l0, ..._reverse, weight_hr_l0 where options.proj_size() is set; a cell's
// weight_ih, ...), in the order those operators take them. Overrides::recurrent receives it
// as it receives an nn::LSTM or nn::LSTMCell.
class RecurrentLayersImpl : public torch::nn::Module {
 public:
  RecurrentLayersImpl(torch::nn::detail::RNNOptionsBase options,
                      const std::vector<torch::Tensor>& params, bool training, bool cell = false);
  torch::nn::detail::RNNOptionsBase options;
  bool cell;  // one step of a cell; options.num_layers() is then 1
};

// What emulation puts in the place of the family's own operators. Each returns an undefined
// result to run the operator as it is; any may be empty.
struct Overrides {
  // A layer's output for input x: the custom processing unit for Linear and Conv2d, an
  // approximate activation for ReLU and ReLU6.
  std::function<torch::Tensor(const torch::Tensor& x, torch::nn::Module& layer)> layer;
  // A recurrent module (nn::RNN, LSTM, GRU, RecurrentLayersImpl) or cell (nn::RNNCell, LSTMCell,
  // GRUCell) run step by step from `initial`, on x [length, batch, features] (batch-first modules:
  // [batch, length, features]; cells: [batch, features]) of sequences of `lengths` (CPU; undefined:
  // all full): outputs zero beyond each sequence's end, as on packed sequences.
  std::function<RecurrentResult(const torch::Tensor& x, const torch::Tensor& lengths,
                                const RecurrentState& initial, torch::nn::Module& cells)>
      recurrent;
  // a @ b, batched over leading dimensions (torch::matmul), for products of two activations
  // (attention scores and contexts).
  std::function<torch::Tensor(const torch::Tensor& a, const torch::Tensor& b)> product;
  // x W^T + b for weights that no Linear module holds (attention's input projection, a tied
  // output projection); b may be undefined.
  std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& w,
                              const torch::Tensor& b)>
      linear;
  // conv2d(x, w, b) of that geometry for weights that no Conv2d module holds; b may be
  // undefined.
  std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& w,
                              const torch::Tensor& b, const ConvOptions& geometry)>
      conv2d;
  // Where the random streams of the emulation's stochastic rounding stand, and a way to put
  // them there: a recomputed stretch of the forward pass (PointsReplay) rounds as it did the
  // first time. Empty: nothing random.
  std::function<std::vector<uint64_t>()> tell_streams;
  std::function<void(const std::vector<uint64_t>&)> seek_streams;
};

// True while a hook or overrides are installed on this thread: a family whose library
// modules keep their operators inside (nn::Transformer) then runs its own composition of
// the same modules through the points.
bool points_installed();

// x itself when no hook is installed on this thread.
torch::Tensor activation_point(const torch::Tensor& x);

// relu(x) (in place when `inplace`, as torchvision's models do it), or what an installed
// override puts in a ReLU's place. For a family's ReLUs that are not modules (functional
// relu in a forward method, a residual block's last one).
torch::Tensor relu_op(const torch::Tensor& x, bool inplace = false);
// min(relu(x), ceiling) (Deep Speech 2's clipped ReLU), or the override's ReLU.
torch::Tensor clipped_relu_op(const torch::Tensor& x, double ceiling);

// torch::matmul(a, b) of two activations, each through the activation point, or the
// override's product.
torch::Tensor product_op(torch::Tensor a, torch::Tensor b);
// F::linear(x, w, b) with x through the activation point, or the override's linear.
torch::Tensor linear_op(torch::Tensor x, const torch::Tensor& w, const torch::Tensor& b = {});
// torch::conv2d(x, w, b, ...) with x through the activation point, or the override's conv2d.
// `layer`: the weight that names the layer to the hook, where w is a view of it (a 1-D
// convolution's, run as a 2-D one); null: w.
torch::Tensor conv2d_op(torch::Tensor x, const torch::Tensor& w, const torch::Tensor& b,
                        const ConvOptions& geometry, const torch::Tensor* layer = nullptr);

// What the installed override computes for m from state `initial` on x, padded sequences of
// `lengths` (as Overrides::recurrent takes them), or an undefined output:
// the caller then runs its own operator.
RecurrentResult recurrent_layers_op(const torch::Tensor& x, const torch::Tensor& lengths,
                                    const RecurrentState& initial, RecurrentLayersImpl& m);

namespace detail {
// Passes x through layer m's activation point (m a Linear or Conv2d) and returns what the
// installed override computes for m, or an undefined tensor.
torch::Tensor enter_layer(torch::Tensor& x, torch::nn::Module& m);
RecurrentResult enter_recurrent(const torch::Tensor& x, const torch::Tensor& lengths,
                                const RecurrentState& initial, torch::nn::Module& m);
inline RecurrentState state_of(const torch::Tensor& h) { return {h, {}}; }
inline RecurrentState state_of(const std::tuple<torch::Tensor, torch::Tensor>& hc) {
  return {std::get<0>(hc), std::get<1>(hc)};
}
}  // namespace detail

// One module called by a family's forward method rather than by forward_with_points
// (torch::nn::Conv2d, Linear, ReLU6, ...): its activation point, then the override's output
// or the module's own forward.
template <typename Holder>
torch::Tensor layer_op(Holder& m, torch::Tensor x) {
  torch::Tensor y = detail::enter_layer(x, *m);
  return y.defined() ? y : m->forward(x);
}

// A recurrent module (torch::nn::RNN, LSTM, GRU) run from a zero state on x, padded
// sequences of `lengths` (CPU, longest first) or all full: its output sequence and final
// state as the installed override computes them (the cells one step at a time, emulated),
// or the module's own fused forward (on packed sequences where lengths are given).
template <typename Holder>
RecurrentResult recurrent_state_op(Holder& m, const torch::Tensor& x,
                                   const torch::Tensor& lengths = {}) {
  RecurrentResult r = detail::enter_recurrent(x, lengths, {}, *m);
  if (r.output.defined()) return r;
  if (!lengths.defined()) {
    auto [out, state] = m->forward(x);
    return {out, detail::state_of(state)};
  }
  namespace rnn_utils = torch::nn::utils::rnn;
  const bool batch_first = m->options.batch_first();
  const auto packed = rnn_utils::pack_padded_sequence(x, lengths, batch_first);
  auto [out, state] = m->forward_with_packed_input(packed);
  return {std::get<0>(rnn_utils::pad_packed_sequence(out, batch_first, 0.0, x.size(batch_first))),
          detail::state_of(state)};
}
// Its output sequence only.
template <typename Holder>
torch::Tensor recurrent_op(Holder& m, const torch::Tensor& x, const torch::Tensor& lengths = {}) {
  return recurrent_state_op(m, x, lengths).output;
}

// One step of an LSTM cell (torch::nn::LSTMCell) from state (h, c): its new state, from the
// override or the cell's own forward.
template <typename Holder>
RecurrentState lstm_cell_op(Holder& m, const torch::Tensor& x, const RecurrentState& state) {
  RecurrentResult r = detail::enter_recurrent(x, {}, state, *m);
  if (r.output.defined()) return r.state;
  return detail::state_of(m->forward(x, std::make_tuple(state.h, state.c)));
}

// Runs a Sequential with an activation point before every Linear and Conv2d in it, and each
// module through the installed override, if any.
torch::Tensor forward_with_points(torch::nn::Sequential& s, torch::Tensor x);

// Installs a hook and overrides on this thread for its lifetime (the forward pass runs on
// the calling thread; intra-op workers never call module code).
class ActivationHookScope {
 public:
  explicit ActivationHookScope(const ActivationHook* hook, const Overrides* overrides = nullptr);
  ~ActivationHookScope();
  ActivationHookScope(const ActivationHookScope&) = delete;
  ActivationHookScope& operator=(const ActivationHookScope&) = delete;

 private:
  const ActivationHook* previous_;
  const Overrides* previous_overrides_;
};

// The hook and overrides installed on this thread when it is made, and where their random
// streams stand then: a stretch of the forward pass re-run later (recomputation, whose re-run
// happens in backward, outside the forward pass's ActivationHookScope) goes through the same
// points and draws the same rounding.
class PointsReplay {
 public:
  PointsReplay();
  // For its lifetime: the captured hook and overrides installed on this thread, their streams
  // rewound to the capture; on exit the streams go back to where they stood before it.
  class Scope {
   public:
    explicit Scope(const PointsReplay& replay);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ActivationHookScope points_;
    const Overrides* overrides_;
    std::vector<uint64_t> resume_;
  };

 private:
  const ActivationHook* hook_;
  const Overrides* overrides_;
  std::vector<uint64_t> positions_;
};

}  // namespace tb
