#include "model/torchscript_points.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>

#include <algorithm>
#include <set>

#include "model/activation_point.h"

namespace tb {
namespace {

using at::IntArrayRef;
using torch::Tensor;

std::array<int64_t, 2> pair_of(IntArrayRef v) {
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

Tensor or_undefined(const c10::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }

Tensor point_linear(const Tensor& x, const Tensor& w, const c10::optional<Tensor>& b) {
  return linear_op(x, w, or_undefined(b));
}

Tensor point_conv2d(const Tensor& x, const Tensor& w, const c10::optional<Tensor>& b,
                    IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  ConvOptions g{pair_of(stride), pair_of(padding), pair_of(dilation), groups};
  // An unbatched input ([C, H, W]), which torch::conv2d takes and the unit does not.
  if (x.dim() == 3) return conv2d_op(x.unsqueeze(0), w, or_undefined(b), g).squeeze(0);
  return conv2d_op(x, w, or_undefined(b), g);
}

// As a 2-D convolution of height 1, so that it runs on the unit too; the hook still sees
// the layer's own weight.
Tensor point_conv1d(const Tensor& x, const Tensor& w, const c10::optional<Tensor>& b,
                    IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  if (!points_installed()) return at::conv1d(x, w, b, stride, padding, dilation, groups);
  ConvOptions g{{1, stride[0]}, {0, padding[0]}, {1, dilation[0]}, groups};
  const bool unbatched = x.dim() == 2;
  const Tensor x4 = (unbatched ? x.unsqueeze(0) : x).unsqueeze(2);
  const Tensor y = conv2d_op(x4, w.unsqueeze(2), or_undefined(b), g, &w).squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

// A traced convolution (tracing records aten::_convolution). Only untransposed ones are
// routed here (route_through_points); a 3-D one cannot pass the points. Without points, the
// operator the graph had, as for the 1-D one.
Tensor point_convolution(const Tensor& x, const Tensor& w, const c10::optional<Tensor>& b,
                         IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         bool transposed, IntArrayRef output_padding, int64_t groups,
                         bool benchmark, bool deterministic, bool cudnn_enabled, bool allow_tf32) {
  if (!points_installed())
    return at::_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups,
                            benchmark, deterministic, cudnn_enabled, allow_tf32);
  if (w.dim() == 4) return point_conv2d(x, w, b, stride, padding, dilation, groups);
  TORCH_CHECK(w.dim() == 3, "trainbench: a ", w.dim() - 2,
              "-d convolution of a TorchScript module cannot run through emulation's points "
              "(1-d and 2-d ones can)");
  return point_conv1d(x, w, b, stride, padding, dilation, groups);
}

// In place, as the graph expects: its later uses read `x`. The point's replacement works on
// a copy, because it may keep its input for its gradient.
template <typename Op>
Tensor& in_place(Tensor& x, Op op) {
  const Tensor y = op(x.clone());
  x.copy_(y);
  return x;
}

Tensor point_relu(const Tensor& x) { return relu_op(x); }
Tensor& point_relu_(Tensor& x) {
  if (!points_installed()) return x.relu_();
  return in_place(x, [](const Tensor& c) { return relu_op(c); });
}

// hardtanh(0, c) is ReLU6 (c = 6) or a clipped ReLU: the override's ReLU replaces it.
Tensor point_hardtanh(const Tensor& x, const c10::Scalar& min, const c10::Scalar& max) {
  if (min.toDouble() != 0.0) return torch::hardtanh(x, min, max);
  return clipped_relu_op(x, max.toDouble());
}
Tensor point_relu6(const Tensor& x) { return clipped_relu_op(x, 6.0); }
Tensor& point_relu6_(Tensor& x) {
  if (!points_installed()) return torch::hardtanh_(x, 0.0, 6.0);
  return in_place(x, point_relu6);
}
Tensor& point_hardtanh_(Tensor& x, const c10::Scalar& min, const c10::Scalar& max) {
  if (!points_installed()) return torch::hardtanh_(x, min, max);
  return in_place(x, [&](const Tensor& c) { return point_hardtanh(c, min, max); });
}

// A product with a module's weight matrix (a leaf that requires its gradient) is a linear
// layer whose weight does not pass the activation point; any other is a product of two
// activations.
bool is_weight(const Tensor& t) { return t.dim() == 2 && t.is_leaf() && t.requires_grad(); }
Tensor product(const Tensor& a, const Tensor& b) {
  if (is_weight(b) && !is_weight(a)) return linear_op(a, b.t());
  if (is_weight(a) && !is_weight(b)) {
    // W @ x = (x^T W^T)^T over the last two dimensions; a vector x needs no transposing.
    if (b.dim() == 1) return linear_op(b, a);
    return linear_op(b.transpose(-1, -2), a).transpose(-1, -2);
  }
  return product_op(a, b);
}
// beta * self + alpha * (a @ b) with the product on the points (addmm, baddbmm).
Tensor scaled_sum(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  Tensor y = product(a, b);
  if (alpha.toDouble() != 1.0) y = y * alpha;
  if (beta.toDouble() == 0.0) return y;  // self ignored, NaN or not, as addmm does
  return beta.toDouble() == 1.0 ? y + self : y + self * beta;
}
Tensor point_addmm(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  return points_installed() ? scaled_sum(self, a, b, beta, alpha)
                            : at::addmm(self, a, b, beta, alpha);
}
Tensor point_baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                     const c10::Scalar& alpha) {
  return points_installed() ? scaled_sum(self, a, b, beta, alpha)
                            : at::baddbmm(self, a, b, beta, alpha);
}

// nn.MultiheadAttention's and nn.TransformerEncoderLayer's fused paths, which they take in
// inference only (no gradients): their graphs also hold the composed path that training
// runs, through the points. Under points, the fused one is refused rather than run plain.
constexpr const char* kFusedRefusal =
    "trainbench: the fused inference path of nn.MultiheadAttention and "
    "nn.TransformerEncoderLayer cannot run through emulation's points (training runs the "
    "composed one)";
std::tuple<Tensor, Tensor> point_native_mha(const Tensor& q, const Tensor& k, const Tensor& v,
                                            int64_t embed_dim, int64_t heads, const Tensor& qkv_w,
                                            const Tensor& qkv_b, const Tensor& proj_w,
                                            const Tensor& proj_b, const c10::optional<Tensor>& mask,
                                            bool need_weights, bool average,
                                            c10::optional<int64_t> mask_type) {
  TORCH_CHECK(!points_installed(), kFusedRefusal);
  return at::_native_multi_head_attention(q, k, v, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b,
                                          mask, need_weights, average, mask_type);
}
Tensor point_encoder_layer(const Tensor& src, int64_t embed_dim, int64_t heads, const Tensor& qkv_w,
                           const Tensor& qkv_b, const Tensor& proj_w, const Tensor& proj_b,
                           bool use_gelu, bool norm_first, double eps, const Tensor& nw1,
                           const Tensor& nb1, const Tensor& nw2, const Tensor& nb2,
                           const Tensor& fw1, const Tensor& fb1, const Tensor& fw2,
                           const Tensor& fb2, const c10::optional<Tensor>& mask,
                           c10::optional<int64_t> mask_type) {
  TORCH_CHECK(!points_installed(), kFusedRefusal);
  return at::_transformer_encoder_layer_fwd(src, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b,
                                            use_gelu, norm_first, eps, nw1, nb1, nw2, nb2, fw1, fb1,
                                            fw2, fb2, mask, mask_type);
}

// Without points, the operator the graph had (their checks and their profile names).
Tensor point_matmul(const Tensor& a, const Tensor& b) {
  return points_installed() ? product(a, b) : at::matmul(a, b);
}
Tensor point_mm(const Tensor& a, const Tensor& b) {
  return points_installed() ? product(a, b) : at::mm(a, b);
}
Tensor point_bmm(const Tensor& a, const Tensor& b) {
  return points_installed() ? product(a, b) : at::bmm(a, b);
}

// Recurrent layers (scripted nn.RNN, LSTM, GRU) on the override's cells, one step at a time,
// with the module's own parameters; undefined without an override (the fused operator then
// runs). On padded input, or on packed sequences (data, batch_sizes: batch_first undefined).
RecurrentResult recurrent(torch::nn::detail::RNNOptionsBase::rnn_options_base_mode_t mode,
                          const Tensor& input, const Tensor& batch_sizes,
                          const RecurrentState& initial, at::TensorList params, bool has_biases,
                          int64_t num_layers, double dropout, bool train, bool bidirectional,
                          bool batch_first) {
  if (!points_installed() || params.size() < 2) return {};
  torch::nn::detail::RNNOptionsBase o(mode, params[0].size(1), params[1].size(1));
  o.num_layers(num_layers).bias(has_biases).dropout(dropout);
  o.bidirectional(bidirectional).batch_first(batch_first);
  // An LSTM with a projection has one more weight per layer and direction (weight_hr): the
  // emulated cells refuse it (unit_recurrent), by name.
  const size_t per = params.size() / size_t(num_layers * (bidirectional ? 2 : 1));
  if (per == (has_biases ? 5u : 3u)) o.proj_size(params[per - 1].size(0));
  RecurrentLayersImpl m(o, params.vec(), train);
  if (!batch_sizes.defined()) return recurrent_layers_op(input, {}, initial, m);
  auto [padded, lengths] =
      at::_pad_packed_sequence(input, batch_sizes, false, 0.0, batch_sizes.size(0));
  RecurrentResult r = recurrent_layers_op(padded, lengths, initial, m);
  if (r.output.defined())
    r.output = std::get<0>(at::_pack_padded_sequence(r.output, lengths, false));
  return r;
}

std::tuple<Tensor, Tensor, Tensor> point_lstm(const Tensor& input, at::TensorList hx,
                                              at::TensorList params, bool has_biases,
                                              int64_t num_layers, double dropout, bool train,
                                              bool bidirectional, bool batch_first) {
  const RecurrentResult r = recurrent(torch::kLSTM, input, {}, {hx[0], hx[1]}, params, has_biases,
                                      num_layers, dropout, train, bidirectional, batch_first);
  if (r.output.defined()) return {r.output, r.state.h, r.state.c};
  return at::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                  batch_first);
}
std::tuple<Tensor, Tensor, Tensor> point_lstm_packed(const Tensor& data, const Tensor& batch_sizes,
                                                     at::TensorList hx, at::TensorList params,
                                                     bool has_biases, int64_t num_layers,
                                                     double dropout, bool train,
                                                     bool bidirectional) {
  const RecurrentResult r = recurrent(torch::kLSTM, data, batch_sizes, {hx[0], hx[1]}, params,
                                      has_biases, num_layers, dropout, train, bidirectional, false);
  if (r.output.defined()) return {r.output, r.state.h, r.state.c};
  return at::lstm(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                  bidirectional);
}

// GRU and the two plain RNNs: one state, the same arguments.
#define TB_SINGLE_STATE(name, mode, fused)                                                         \
  std::tuple<Tensor, Tensor> name(const Tensor& input, const Tensor& hx, at::TensorList params,    \
                                  bool has_biases, int64_t num_layers, double dropout, bool train, \
                                  bool bidirectional, bool batch_first) {                          \
    const RecurrentResult r = recurrent(mode, input, {}, {hx, {}}, params, has_biases, num_layers, \
                                        dropout, train, bidirectional, batch_first);               \
    if (r.output.defined()) return {r.output, r.state.h};                                          \
    return fused(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,         \
                 batch_first);                                                                     \
  }                                                                                                \
  std::tuple<Tensor, Tensor> name##_packed(                                                        \
      const Tensor& data, const Tensor& batch_sizes, const Tensor& hx, at::TensorList params,      \
      bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional) {       \
    const RecurrentResult r = recurrent(mode, data, batch_sizes, {hx, {}}, params, has_biases,     \
                                        num_layers, dropout, train, bidirectional, false);         \
    if (r.output.defined()) return {r.output, r.state.h};                                          \
    return fused(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,            \
                 bidirectional);                                                                   \
  }
TB_SINGLE_STATE(point_gru, torch::kGRU, at::gru)
TB_SINGLE_STATE(point_rnn_tanh, torch::kRNN_TANH, at::rnn_tanh)
TB_SINGLE_STATE(point_rnn_relu, torch::kRNN_RELU, at::rnn_relu)
#undef TB_SINGLE_STATE

// One step of a scripted cell (nn.LSTMCell, GRUCell, RNNCell) on the override's cell, or
// undefined.
RecurrentResult cell_step(torch::nn::detail::RNNOptionsBase::rnn_options_base_mode_t mode,
                          const Tensor& input, const RecurrentState& state, const Tensor& w_ih,
                          const Tensor& w_hh, const c10::optional<Tensor>& b_ih,
                          const c10::optional<Tensor>& b_hh) {
  const bool bias = b_ih.has_value() && b_ih->defined();
  if (!points_installed() || bias != (b_hh.has_value() && b_hh->defined())) return {};
  torch::nn::detail::RNNOptionsBase o(mode, w_ih.size(1), w_hh.size(1));
  o.bias(bias);
  std::vector<Tensor> params{w_ih, w_hh};
  if (bias) params.insert(params.end(), {*b_ih, *b_hh});
  RecurrentLayersImpl m(o, params, /*training=*/true, /*cell=*/true);
  return recurrent_layers_op(input, {}, state, m);
}

std::tuple<Tensor, Tensor> point_lstm_cell(const Tensor& input, at::TensorList hx,
                                           const Tensor& w_ih, const Tensor& w_hh,
                                           const c10::optional<Tensor>& b_ih,
                                           const c10::optional<Tensor>& b_hh) {
  const RecurrentResult r = cell_step(torch::kLSTM, input, {hx[0], hx[1]}, w_ih, w_hh, b_ih, b_hh);
  if (r.output.defined()) return {r.state.h, r.state.c};
  return at::lstm_cell(input, hx, w_ih, w_hh, b_ih, b_hh);
}

#define TB_CELL(name, mode, fused)                                                           \
  Tensor name(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, \
              const c10::optional<Tensor>& b_ih, const c10::optional<Tensor>& b_hh) {        \
    const RecurrentResult r = cell_step(mode, input, {hx, {}}, w_ih, w_hh, b_ih, b_hh);      \
    return r.output.defined() ? r.state.h : fused(input, hx, w_ih, w_hh, b_ih, b_hh);        \
  }
TB_CELL(point_gru_cell, torch::kGRU, at::gru_cell)
TB_CELL(point_rnn_tanh_cell, torch::kRNN_TANH, at::rnn_tanh_cell)
TB_CELL(point_rnn_relu_cell, torch::kRNN_RELU, at::rnn_relu_cell)
#undef TB_CELL

struct Route {
  const char* from;  // the schema a node must match
  const char* to;
};

const std::vector<Route>& routes() {
  static const std::vector<Route> r = {
      {"aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
       "trainbench::linear"},
      {"aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
       "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor",
       "trainbench::conv2d"},
      {"aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, "
       "int[1] padding=0, int[1] dilation=1, int groups=1) -> Tensor",
       "trainbench::conv1d"},
      {"aten::_convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, "
       "int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups, "
       "bool benchmark, bool deterministic, bool cudnn_enabled, bool allow_tf32) -> Tensor",
       "trainbench::convolution"},
      {"aten::relu(Tensor self) -> Tensor", "trainbench::relu"},
      {"aten::relu_(Tensor(a!) self) -> Tensor(a!)", "trainbench::relu_"},
      {"aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
       "trainbench::hardtanh"},
      {"aten::hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)",
       "trainbench::hardtanh_"},
      {"aten::relu6(Tensor self) -> Tensor", "trainbench::relu6"},
      {"aten::relu6_(Tensor(a!) self) -> Tensor(a!)", "trainbench::relu6_"},
      {"aten::matmul(Tensor self, Tensor other) -> Tensor", "trainbench::matmul"},
      {"aten::mm(Tensor self, Tensor mat2) -> Tensor", "trainbench::mm"},
      {"aten::bmm(Tensor self, Tensor mat2) -> Tensor", "trainbench::bmm"},
      {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> "
       "Tensor",
       "trainbench::addmm"},
      {"aten::baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, "
       "Scalar alpha=1) -> Tensor",
       "trainbench::baddbmm"},
      {"aten::_native_multi_head_attention(Tensor query, Tensor key, Tensor value, "
       "int embed_dim, int num_head, Tensor qkv_weight, Tensor qkv_bias, Tensor proj_weight, "
       "Tensor proj_bias, Tensor? mask=None, bool need_weights=True, "
       "bool average_attn_weights=True, int? mask_type=None) -> (Tensor, Tensor)",
       "trainbench::native_multi_head_attention"},
      {"aten::_transformer_encoder_layer_fwd(Tensor src, int embed_dim, int num_heads, "
       "Tensor qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, "
       "bool use_gelu, bool norm_first, float eps, Tensor norm_weight_1, Tensor norm_bias_1, "
       "Tensor norm_weight_2, Tensor norm_bias_2, Tensor ffn_weight_1, Tensor ffn_bias_1, "
       "Tensor ffn_weight_2, Tensor ffn_bias_2, Tensor? mask=None, int? mask_type=None) -> "
       "Tensor",
       "trainbench::transformer_encoder_layer_fwd"},
      {"aten::lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, "
       "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> "
       "(Tensor, Tensor, Tensor)",
       "trainbench::lstm"},
      {"aten::gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, "
       "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> "
       "(Tensor, Tensor)",
       "trainbench::gru"},
      {"aten::rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, "
       "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> "
       "(Tensor, Tensor)",
       "trainbench::rnn_tanh"},
      {"aten::rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, "
       "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> "
       "(Tensor, Tensor)",
       "trainbench::rnn_relu"},
      {"aten::lstm.data(Tensor data, Tensor batch_sizes, Tensor[] hx, Tensor[] params, "
       "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional) -> "
       "(Tensor, Tensor, Tensor)",
       "trainbench::lstm_packed"},
      {"aten::gru.data(Tensor data, Tensor batch_sizes, Tensor hx, Tensor[] params, "
       "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional) -> "
       "(Tensor, Tensor)",
       "trainbench::gru_packed"},
      {"aten::rnn_tanh.data(Tensor data, Tensor batch_sizes, Tensor hx, Tensor[] params, "
       "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional) -> "
       "(Tensor, Tensor)",
       "trainbench::rnn_tanh_packed"},
      {"aten::rnn_relu.data(Tensor data, Tensor batch_sizes, Tensor hx, Tensor[] params, "
       "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional) -> "
       "(Tensor, Tensor)",
       "trainbench::rnn_relu_packed"},
      {"aten::lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
       "Tensor? b_hh=None) -> (Tensor, Tensor)",
       "trainbench::lstm_cell"},
      {"aten::gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
       "Tensor? b_hh=None) -> Tensor",
       "trainbench::gru_cell"},
      {"aten::rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, "
       "Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor",
       "trainbench::rnn_tanh_cell"},
      {"aten::rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, "
       "Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor",
       "trainbench::rnn_relu_cell"},
  };
  return r;
}

// Each operator takes exactly the arguments of the one it replaces (routes(), below).
TORCH_LIBRARY(trainbench, m) {
  for (const Route& r : routes()) {
    c10::FunctionSchema schema = torch::jit::parseSchema(r.from).cloneWithName(r.to, "");
    schema.setAliasAnalysis(c10::AliasAnalysisKind::FROM_SCHEMA);  // relu_ writes its input
    m.def(std::move(schema));
  }
}

// Composite: autograd differentiates what the operators call, as for any family.
TORCH_LIBRARY_IMPL(trainbench, CompositeImplicitAutograd, m) {
  m.impl("linear", TORCH_FN(point_linear));
  m.impl("conv2d", TORCH_FN(point_conv2d));
  m.impl("conv1d", TORCH_FN(point_conv1d));
  m.impl("convolution", TORCH_FN(point_convolution));
  m.impl("relu", TORCH_FN(point_relu));
  m.impl("relu_", TORCH_FN(point_relu_));
  m.impl("hardtanh", TORCH_FN(point_hardtanh));
  m.impl("hardtanh_", TORCH_FN(point_hardtanh_));
  m.impl("relu6", TORCH_FN(point_relu6));
  m.impl("relu6_", TORCH_FN(point_relu6_));
  m.impl("matmul", TORCH_FN(point_matmul));
  m.impl("mm", TORCH_FN(point_mm));
  m.impl("addmm", TORCH_FN(point_addmm));
  m.impl("baddbmm", TORCH_FN(point_baddbmm));
  m.impl("native_multi_head_attention", TORCH_FN(point_native_mha));
  m.impl("transformer_encoder_layer_fwd", TORCH_FN(point_encoder_layer));
  m.impl("bmm", TORCH_FN(point_bmm));
  m.impl("lstm", TORCH_FN(point_lstm));
  m.impl("gru", TORCH_FN(point_gru));
  m.impl("rnn_tanh", TORCH_FN(point_rnn_tanh));
  m.impl("rnn_relu", TORCH_FN(point_rnn_relu));
  m.impl("lstm_packed", TORCH_FN(point_lstm_packed));
  m.impl("gru_packed", TORCH_FN(point_gru_packed));
  m.impl("rnn_tanh_packed", TORCH_FN(point_rnn_tanh_packed));
  m.impl("rnn_relu_packed", TORCH_FN(point_rnn_relu_packed));
  m.impl("lstm_cell", TORCH_FN(point_lstm_cell));
  m.impl("gru_cell", TORCH_FN(point_gru_cell));
  m.impl("rnn_tanh_cell", TORCH_FN(point_rnn_tanh_cell));
  m.impl("rnn_relu_cell", TORCH_FN(point_rnn_relu_cell));
}

// Layer operators that stay with the interpreter: a module using one cannot take activation
// formats, units or activations.
bool is_layer_operator(const std::string& kind) {
  static const std::set<std::string> ops = {"aten::addmm",
                                            "aten::addbmm",
                                            "aten::baddbmm",
                                            "aten::addmv",
                                            "aten::mv",
                                            "aten::dot",
                                            "aten::einsum",
                                            "aten::tensordot",
                                            "aten::linalg_matmul",
                                            "aten::inner",
                                            "aten::outer",
                                            "aten::ger",
                                            "aten::chain_matmul",
                                            "aten::linalg_multi_dot",
                                            "aten::_addmm_activation",
                                            "aten::_convolution_mode",
                                            "aten::conv_tbc",
                                            "prim::fork",
                                            "aten::bilinear",
                                            "aten::conv1d",
                                            "aten::conv2d",
                                            "aten::conv3d",
                                            "aten::convolution",
                                            "aten::_convolution",
                                            "aten::conv_transpose1d",
                                            "aten::conv_transpose2d",
                                            "aten::conv_transpose3d",
                                            "aten::lstm",
                                            "aten::gru",
                                            "aten::rnn_tanh",
                                            "aten::rnn_relu",
                                            "aten::lstm_cell",
                                            "aten::gru_cell",
                                            "aten::rnn_tanh_cell",
                                            "aten::rnn_relu_cell",
                                            "aten::multi_head_attention_forward",
                                            "aten::_native_multi_head_attention",
                                            "aten::_transformer_encoder_layer_fwd",
                                            "aten::scaled_dot_product_attention"};
  return ops.count(kind) > 0;
}

const char* route_of(torch::jit::Node* n) {
  for (const Route& r : routes()) {
    if (!n->matches(r.from)) continue;
    // A transposed or 3-D convolution has no route, nor one whose transposition or number
    // of spatial dimensions (its strides') is not a constant.
    if (std::string(r.to) == "trainbench::convolution") {
      const auto transposed = torch::jit::toIValue(n->input(6));
      if (!transposed || !transposed->isBool() || transposed->toBool()) return nullptr;
      torch::jit::Node* stride = n->input(3)->node();
      const auto constant = torch::jit::toIValue(n->input(3));
      const size_t dims = constant && constant->isIntList() ? constant->toIntList().size()
                          : stride->kind() == c10::prim::ListConstruct ? stride->inputs().size()
                                                                       : 0;
      if (dims != 1 && dims != 2) return nullptr;
    }
    return r.to;
  }
  return nullptr;
}

void rewrite(torch::jit::Block* block, std::vector<std::string>& left) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    torch::jit::Node* n = *it++;
    for (torch::jit::Block* b : n->blocks()) rewrite(b, left);
    const char* to = route_of(n);
    if (!to) {
      const std::string kind = n->kind().toQualString();
      if (is_layer_operator(kind) && std::find(left.begin(), left.end(), kind) == left.end())
        left.push_back(kind);
      continue;
    }
    torch::jit::Node* r =
        n->owningGraph()->create(c10::Symbol::fromQualString(to), n->inputs(), n->outputs().size());
    r->copyMetadata(n);
    r->insertBefore(n);
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      r->output(i)->setType(n->output(i)->type());
      n->output(i)->replaceAllUsesWith(r->output(i));
    }
    n->destroy();
  }
}

}  // namespace

std::vector<std::string> route_through_points(torch::jit::Module& m) {
  std::vector<std::string> left;
  for (torch::jit::Function* f : m._ivalue()->compilation_unit()->get_functions())
    if (auto* g = torch::jit::tryToGraphFunction(*f)) rewrite(g->graph()->block(), left);
  return left;
}

std::vector<std::vector<torch::Tensor>> script_layers(const torch::jit::Module& m) {
  std::vector<std::vector<torch::Tensor>> out;
  for (const auto& sub : m.modules()) {
    // torch.nn's own classes; a traced module's may carry a mangled namespace
    // (torch.nn.modules.linear.___torch_mangle_3.Linear).
    const std::string name = sub.type()->name()->qualifiedName();
    const size_t dot = name.rfind('.');
    const std::string cls = name.substr(dot + 1);
    if (name.find("torch.nn.modules.") == std::string::npos ||
        (cls != "Linear" && cls != "Conv1d" && cls != "Conv2d"))
      continue;
    std::vector<torch::Tensor> params;
    for (const char* p : {"weight", "bias"})
      if (sub.hasattr(p) && sub.attr(p).isTensor()) params.push_back(sub.attr(p).toTensor());
    out.push_back(params);
  }
  return out;
}

}  // namespace tb
