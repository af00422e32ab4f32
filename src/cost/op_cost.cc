#include "cost/op_cost.h"

#include <algorithm>
#include <set>

namespace tb::cost {
namespace {

double numel(const std::vector<int64_t>& s) {
  double n = 1;
  for (auto d : s) n *= double(d);
  return n;
}

bool one_of(const std::string& name, const std::set<std::string>& names) {
  return names.count(name) > 0;
}

// Operators whose FLOPs are one or more per element of their largest input: the generated
// families' activations and their gradients, the residual add, the optimizers' updates.
double elementwise_flops_per_element(const std::string& op) {
  static const std::set<std::string> one = {"relu",
                                            "relu_",
                                            "threshold_backward",
                                            "add",
                                            "add_",
                                            "sub",
                                            "sub_",
                                            "mul",
                                            "mul_",
                                            "div",
                                            "div_",
                                            "sqrt",
                                            "sqrt_",
                                            "rsqrt",
                                            "tanh",
                                            "tanh_",
                                            "sigmoid",
                                            "sigmoid_",
                                            "tanh_backward",
                                            "sigmoid_backward",
                                            "neg",
                                            "exp",
                                            "exp_",
                                            "clamp",
                                            "clamp_",
                                            "reciprocal",
                                            "lerp_",
                                            "maximum",
                                            "minimum"};
  // value * t1 op t2 + self: the multiply or divide and the add (a scale by value = 1 is free)
  static const std::set<std::string> two = {"addcmul", "addcmul_", "addcdiv", "addcdiv_"};
  if (one.count(op)) return 1;
  if (two.count(op)) return 2;
  return -1;
}

// Operators of the translation and speech models (transformer, seq2seq, deepspeech2):
// attention softmax, LayerNorm, dropout, masks, CTC, the embedding gradient (hardtanh is
// counted with ReLU6 below).
// Returns false for an op it does not know.
bool sequence_op_cost(const std::string& name, const std::vector<std::vector<int64_t>>& shapes,
                      int64_t eb, double in_bytes, double largest, OpCost& c) {
  auto n0 = [&]() { return shapes.empty() ? 0.0 : numel(shapes[0]); };
  if (name == "_softmax") {
    c = {5 * n0(), in_bytes + eb * n0(), true};  // max, subtract, exp, sum, divide
  } else if (name == "_softmax_backward_data") {
    c = {3 * n0(), in_bytes + eb * n0(), true};
  } else if (name == "native_layer_norm") {
    c = {7 * n0(), in_bytes + eb * n0(), true};
  } else if (name == "native_layer_norm_backward") {
    c = {12 * n0(), in_bytes + eb * n0(), true};  // 9 input + 3 weight, as BatchNorm
  } else if (name == "native_dropout" || name == "native_dropout_backward" ||
             name == "masked_fill" || name == "masked_fill_") {
    c = {largest, in_bytes + eb * largest, true};  // one multiply or select each
  } else if (name == "embedding_dense_backward") {
    c = {n0(), in_bytes + eb * n0(), true};  // scatter-add of the output gradient
  } else if ((name == "_ctc_loss" || name == "_ctc_loss_backward") && shapes.size() >= 2 &&
             shapes[0].size() == 3) {
    // log_probs [T, B, C] (backward: grad first), targets [B, S]: the lattice at its
    // padded size (the recorded shapes carry no lengths), as cost::ctc counts it.
    const auto& lp = name == "_ctc_loss" ? shapes[0] : shapes[1];
    const auto& tg = name == "_ctc_loss" ? shapes[1] : shapes[2];
    if (lp.size() != 3 || tg.empty()) return false;
    const double frames = double(lp[0]) * lp[1], states = 2.0 * tg.back() + 1;
    c = {name == "_ctc_loss" ? 10 * frames * states : 13 * frames * states + 3 * frames * lp[2],
         in_bytes + 4.0 * frames * states, true};
  } else {
    return false;
  }
  return true;
}

}  // namespace

int64_t profiler_dtype_bytes(const std::string& d) {
  if (d == "float" || d == "int" || d == "unsigned int") return 4;
  if (d == "double" || d == "long int" || d == "long" || d == "int64_t") return 8;
  if (d == "c10::BFloat16" || d == "c10::Half" || d == "short int") return 2;
  if (d == "bool" || d == "unsigned char" || d == "signed char") return 1;
  return 0;
}

OpCost op_cost(const std::string& full_name, const std::vector<std::vector<int64_t>>& shapes,
               const std::vector<std::string>& dtypes,
               const std::vector<std::vector<int64_t>>& no_grad_shapes, bool weight_gradients) {
  const std::string name = full_name.rfind("aten::", 0) == 0 ? full_name.substr(6) : full_name;
  OpCost c;
  // Element size of the op: its first floating-point input.
  int64_t eb = 0;
  double in_bytes = 0, largest = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t b = i < dtypes.size() ? profiler_dtype_bytes(dtypes[i]) : 0;
    if (shapes[i].empty()) continue;  // a scalar or a non-tensor argument
    in_bytes += numel(shapes[i]) * b;
    largest = std::max(largest, numel(shapes[i]));
    const std::string& d = i < dtypes.size() ? dtypes[i] : "";
    if (eb == 0 && (d == "float" || d == "double" || d == "c10::BFloat16" || d == "c10::Half"))
      eb = b;
  }
  if (eb == 0) eb = 4;
  auto dims = [&](size_t i) -> const std::vector<int64_t>& {
    static const std::vector<int64_t> none;
    return i < shapes.size() ? shapes[i] : none;
  };

  if (name == "mm" && dims(0).size() == 2 && dims(1).size() == 2) {
    const double m = dims(0)[0], k = dims(0)[1], n = dims(1)[1];
    c = {2 * m * k * n, in_bytes + eb * m * n, true};
  } else if (name == "addmm" && dims(1).size() == 2 && dims(2).size() == 2) {
    const double m = dims(1)[0], k = dims(1)[1], n = dims(2)[1];
    c = {2 * m * k * n + m * n, in_bytes + eb * m * n, true};  // + the bias add
  } else if ((name == "bmm" || name == "baddbmm") && dims(name == "bmm" ? 0 : 1).size() == 3) {
    const size_t a = name == "bmm" ? 0 : 1;
    const double b = dims(a)[0], m = dims(a)[1], k = dims(a)[2], n = dims(a + 1)[2];
    c = {2 * b * m * k * n + (name == "baddbmm" ? b * m * n : 0), in_bytes + eb * b * m * n, true};
  } else if (name == "convolution_backward" && dims(0).size() == 4 && dims(2).size() == 4) {
    // grad_output, input, weight: the input and the weight gradient, each a convolution
    // of the forward's size. A layer fed by the input batch computes no input gradient.
    const double macs = numel(dims(0)) * dims(2)[1] * dims(2)[2] * dims(2)[3];
    const bool input_grad =
        std::find(no_grad_shapes.begin(), no_grad_shapes.end(), dims(1)) == no_grad_shapes.end();
    const int grads = int(input_grad) + int(weight_gradients);
    c = {grads * 2 * macs,
         in_bytes + (input_grad ? numel(dims(1)) * eb : 0) +
             (weight_gradients ? numel(dims(2)) * eb : 0),
         true};
  } else if (name == "native_batch_norm" || name == "_batch_norm_impl_index") {
    c = {7 * numel(dims(0)), in_bytes + eb * numel(dims(0)), true};
  } else if (name == "native_batch_norm_backward") {
    c = {12 * numel(dims(0)), in_bytes + eb * numel(dims(1)), true};  // 9 input + 3 weight
  } else if (name == "_log_softmax") {
    c = {5 * numel(dims(0)), in_bytes + eb * numel(dims(0)), true};
  } else if (name == "_log_softmax_backward_data") {
    c = {3 * numel(dims(0)), in_bytes + eb * numel(dims(0)), true};
  } else if (name == "avg_pool2d" || name == "adaptive_avg_pool2d" || name == "mean") {
    c = {numel(dims(0)), in_bytes, true};
  } else if (name == "sum" && !dims(0).empty()) {
    c = {numel(dims(0)), in_bytes, true};  // e.g. the bias gradient
  } else if (sequence_op_cost(name, shapes, eb, in_bytes, largest, c)) {
    // counted there
  } else if (const double per = elementwise_flops_per_element(name); per > 0) {
    c = {per * largest, in_bytes + eb * largest, true};
  } else if (one_of(name, {"hardtanh", "hardtanh_", "relu6", "relu6_", "hardtanh_backward"})) {
    // ReLU6 (MobileNetV2) and DeepSpeech2's hardtanh(0, 20): a comparison with each bound,
    // forward and backward.
    c = {2 * numel(dims(0)), in_bytes + eb * numel(dims(0)), true};
  } else if (name == "avg_pool2d_backward" || name == "_adaptive_avg_pool2d_backward") {
    // One FLOP per input-gradient element (the kernel size is not in the recorded shapes).
    c = {numel(dims(1)), in_bytes + eb * numel(dims(1)), true};
  } else if (name == "cat" || name == "bernoulli_") {
    // cat's tensor list has no recorded shapes; dropout's mask draw does no arithmetic.
    c = {0, in_bytes, true};
  } else {
    c = {0, in_bytes, false};
  }
  return c;
}

std::string op_class(const std::string& full_name) {
  std::string n = full_name.rfind("aten::", 0) == 0 ? full_name.substr(6) : full_name;
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // Emulated number formats (emulation/torch_quant.cc): the cost of emulating, not the model's.
  if (n.rfind("tb::quantize", 0) == 0 || has("QuantizeFunction")) return "quantize";
  if (n == "tb::unscale_") return "elementwise";  // loss scaling's division and overflow check
  if (one_of(n, {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear"}) || has("Addmm") ||
      has("MmBackward") || has("Bmm"))
    return "matmul";
  if (has("conv") || has("Convolution")) return "conv";
  if (has("batch_norm") || has("BatchNorm") || has("layer_norm") || has("LayerNorm"))
    return "normalization";
  if (has("ctc") || has("Ctc")) return "softmax-loss";
  if (has("hardtanh") || has("Hardtanh") || has("dropout") || has("Dropout") || has("bernoulli"))
    return "elementwise";
  if (has("pool") || has("Pool")) return "pooling";
  if (has("softmax") || has("Softmax") || has("nll_loss") || has("NllLoss") || has("cross_entropy"))
    return "softmax-loss";
  if (has("lstm") || has("gru") || has("rnn_") || has("LSTM") || has("GRU") || has("RNN"))
    return "rnn";
  if (has("embedding") || has("Embedding")) return "embedding";
  if (elementwise_flops_per_element(n) > 0 || has("Relu") || has("Threshold") || has("Add") ||
      has("Mul") || has("Tanh") || has("Sigmoid"))
    return "elementwise";
  if (one_of(n, {"sum", "mean", "max", "min", "norm"}) || has("Sum") || has("Mean"))
    return "reduction";
  if (one_of(n, {"copy_",       "empty",      "empty_like", "empty_strided", "zeros",
                 "zeros_like",  "zero_",      "fill_",      "ones_like",     "to",
                 "_to_copy",    "contiguous", "clone",      "view",          "reshape",
                 "t",           "transpose",  "permute",    "expand",        "as_strided",
                 "select",      "slice",      "unsqueeze",  "squeeze",       "flatten",
                 "cat",         "stack",      "detach",     "resize_",       "narrow",
                 "chunk",       "split",      "unbind",     "index_select",  "_unsafe_view",
                 "result_type", "lift_fresh", "set_"}) ||
      has("View") || has("Transpose") || has("TBackward") || has("Unsafe") || has("Expand"))
    return "memory";
  if (has("AccumulateGrad") || has("autograd::") || has("Backward")) return "autograd";
  return "other";
}

}  // namespace tb::cost
