// The emulation phase (divide and conquer, step 1): train a real model on real data with a
// proposed number format, processing unit or operator, and count the iterations it needs to
// reach a target test accuracy, over several seeds.
#pragma once
#include <torch/torch.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "emulation/torch_quant.h"
#include "model/activation_point.h"
#include "numerics/extension.h"
#include "numerics/mad.h"
#include "record/emulation.h"

namespace tb::emu {

// Where values are rounded. Weights/weight_grads and activations/errors are the forward value
// and backward gradient of the same quantization op; optimizer state and master weights are
// rounded after every update.
struct Policy {
  QuantPoint weights, activations, errors, weight_grads, optimizer_state, master;
  // Per-layer points (`KEY.N` in numerics text), in the order weights, activations, errors,
  // weight_grads, optimizer_state, master; unset: the global point. Layers are the model's
  // Linear and Conv2d modules in module order; only the numerics= wrapper (family models)
  // applies them.
  std::map<int, std::array<std::optional<QuantPoint>, 6>> layers;
  // The point for place 0..5 (order above) of a layer; layer < 0: the global point.
  const QuantPoint& at(int place, int layer) const;
  std::string loss_scale = "none";  // none | static:S | dynamic[:S0]
  std::optional<num::MadUnit> mad;  // every matrix multiply (and conv, via unfold) on this unit
  std::shared_ptr<const num::Extension> ext_unit;  // ... or on an extension's tb_mad
  std::string activation = "relu";  // relu | tanh | sigmoid | tanh-pwl | sigmoid-pwl | ext:PATH
  std::shared_ptr<const num::Extension> ext_activation;
  // The random Hadamard transform on every Linear's weight-gradient inputs (hadamard.h): its
  // size (0: none) and seed. Family models only.
  int rht_size = 0;
  uint64_t rht_seed = 1;
  // The six global points, in the order above.
  std::array<QuantPoint*, 6> globals() {
    return {&weights, &activations, &errors, &weight_grads, &optimizer_state, &master};
  }
  std::array<const QuantPoint*, 6> globals() const {
    return {&weights, &activations, &errors, &weight_grads, &optimizer_state, &master};
  }
  bool has_unit() const { return mad.has_value() || ext_unit != nullptr; }
  // A unit or a non-ReLU activation: the model's own operators are replaced.
  bool replaces_operators() const { return has_unit() || activation != "relu"; }
  // `mad:...` or `ext:PATH`; `relu|...|ext:PATH`. Throw UsageError.
  void set_unit(const std::string& text);
  void set_activation(const std::string& text);
  std::string str() const;
  // Every point's stochastic stream for one run: runs seeded the same draw the same bits.
  void reseed(uint64_t run_seed);
  // Every point's begin_step() and set_recording() (QuantPoint): at the start of a training
  // step, and around an evaluation.
  void begin_step() const;
  void set_recording(bool on) const;
  void set_counting(bool on) const;
  // What each point's rounding did since the last call, for the points that rounded anything.
  std::vector<ScalingSample> take_scaling(int64_t iteration) const;
  // Every point's stream position, globals then layers' in order; and back to such a list.
  std::vector<uint64_t> stream_positions() const;
  void seek_streams(const std::vector<uint64_t>& positions) const;
};

// Piecewise-linear tanh and sigmoid (33 knots), with the segment slope as their gradient.
torch::Tensor approx_activation(const torch::Tensor& x, const std::string& name);

// The emulated operators, for any model. y = x W^T + b (b may be undefined) and a 2-D
// convolution (im2col and a matrix multiply per group) with every product and sum on the
// policy's unit, forward and backward; plain LibTorch where the policy has no unit. The policy
// must outlive the graph. And the policy's activation (relu, tanh, sigmoid, approximate or an
// extension's) with its gradient.
torch::Tensor unit_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          const Policy& p);
torch::Tensor unit_conv2d(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          const ConvOptions& shape, const Policy& p);
torch::Tensor emulated_activation(const torch::Tensor& x, const Policy& p);

// a @ b (torch::matmul: batched over equal leading dimensions, or b a matrix) with every
// product and sum on the policy's unit, forward and backward: products of two activations.
torch::Tensor unit_matmul(const torch::Tensor& a, const torch::Tensor& b, const Policy& p);

// A stacked torch::nn::RNN, LSTM, GRU or RecurrentLayersImpl (uni- or bidirectional, no projection)
// from state `initial`, computed one cell step at a time, for x [length, batch, features]
// (batch-first modules: [batch, length, features]) of padded sequences of `lengths` (CPU;
// undefined: all full): its output sequence, zero beyond each sequence's end, and final state, as
// LibTorch's on packed sequences; or one step of an RNNCell, LSTMCell or GRUCell. Every product is
// unit_linear's,
// and every input of a product (the layer's input sequence, each step's hidden state) passes
// through `point` first. The policy's activation stands in for the cell's own function where
// it is a version of it: tanh-pwl and an extension's for the cells' tanh, sigmoid-pwl for the
// gates' sigmoid, any for a ReLU cell's ReLU. Throws Unsupported for other modules.
RecurrentResult unit_recurrent(const torch::Tensor& x, const torch::Tensor& lengths,
                               const RecurrentState& initial, torch::nn::Module& cells,
                               const Policy& p,
                               const std::function<torch::Tensor(const torch::Tensor&)>& point);

using Progress = std::function<void(const SeedRun& run, int64_t iteration, double accuracy)>;

// Throws UsageError for bad options; loads Fashion-MNIST (see fashion_mnist.h).
EmulationResult emulate(const EmulationOptions& o, const Policy& p, const Progress& progress = {});

}  // namespace tb::emu
