#include "simulate/accelerator_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/errors.h"
#include "numerics/format.h"
#include "numerics/policy.h"
#include "numerics/scaling.h"

namespace tb::sim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The peak a format of `bits` would run at, most specific first. Integer and fixed-point
// formats prefer int8; block formats count as their elements.
// The peak a format's arithmetic runs at: its own name's, or its class's (8-bit floats on the
// fp8 units, integers and fixed point of 8 bits or fewer on the int8 ones, 4-bit floats on
// fp4), as the peak_tflops keys name them; "" for none.
std::string peak_key(const std::string& name, double bits, bool integer) {
  for (const char* d : {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"})
    if (name == d) return d;
  if (integer && bits <= 8.5) return "int8";
  if (!integer && bits <= 4.5) return "fp4";
  if (!integer && bits <= 8.5) return "fp8";
  return "";
}

std::string stated_peaks(const PlatformDescription& p) {
  std::string out;
  for (const auto& [d, tf] : p.peak_tflops) out += (out.empty() ? "" : ", ") + d;
  return out;
}

bool recurrent(const std::string& op) { return op == "rnn" || op == "lstm" || op == "gru"; }

// The share of a recurrent layer's padded steps that are real: cost::scale_to_packed scales a
// packed sequence's FLOPs but keeps the per-step GEMM shape and count.
double packed_share(const LayerCost& l) {
  const double padded =
      2.0 * double(l.gemm_count) * double(l.gemm_m) * double(l.gemm_n) * double(l.gemm_k);
  return padded > 0 ? std::clamp(l.fwd_matmul_flops / padded, 0.0, 1.0) : 1.0;
}

// Bits per element of a GEMM's operands at a peak's dtype (TF32 keeps fp32 storage).
int64_t matmul_elem_bits(const std::string& dtype) {
  if (dtype == "fp64") return 64;
  if (dtype == "fp32" || dtype == "tf32") return 32;
  if (dtype == "fp16" || dtype == "bf16") return 16;
  if (dtype == "fp4") return 4;
  return 8;  // fp8, int8
}
// Layers autocast runs in fp32 whole (PyTorch's autocast op reference: softmax, log-softmax
// and the losses, layer norm; trainbench's RMSNorm computes in fp32 itself).
bool autocast_fp32_op(const std::string& op) {
  return op == "softmax_xent" || op == "layernorm" || op == "rmsnorm";
}

// LibTorch's CPU cells per time step, the input projection done once for the sequence:
// tanh: hidden projection, add, tanh; LSTM: projection, add, chunk, 3 sigmoid, 2 tanh,
// 3 mul, add; GRU: two projections, two chunks, 2 sigmoid, tanh and 7 mul/add/sub.
double cell_operators(const std::string& op) { return op == "lstm" ? 12 : op == "gru" ? 14 : 3; }

}  // namespace

OpCount count_operators(const StepCost& cost, const std::map<std::string, double>& cell_step_us,
                        bool multi_tensor) {
  OpCount c;
  double tensors = 0;
  for (const auto& l : cost.layers) {
    // A cell whose step time is measured counts as one call per phase; its steps are timed
    // apart (Simulation::cell_steps).
    const bool per_step = recurrent(l.op) && !cell_step_us.count(l.op);
    const double fwd = per_step ? std::max<int64_t>(1, l.gemm_count) * cell_operators(l.op) : 1;
    c.forward += fwd;
    c.backward += fwd * ((l.bwd_input_flops > 0) + (l.bwd_weight_flops > 0));
    if (l.params > 0) tensors += recurrent(l.op) ? 4 : 2;
  }
  // The optimizers' in-place updates do about 2 FLOPs per element each (SGD: 1 update of 2
  // FLOPs, RMSprop: 11 FLOPs in 5 to 6 updates); optimizer_updates > 1 is folded in.
  const double per_param = cost.params > 0 ? cost.opt_flops / double(cost.params) : 0;
  const double updates = per_param > 0 ? std::max(1.0, std::round(per_param / 2)) : 0;
  c.backward += tensors;                                                   // AccumulateGrad
  c.optimizer = multi_tensor ? cost.opt_passes : tensors * (updates + 1);  // + zero_grad
  return c;
}

SystolicMapping map_gemm(int64_t m, int64_t n, int64_t k, int64_t count,
                         const PlatformDescription::Systolic& a) {
  SystolicMapping s;
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return s;
  const bool ws = a.dataflow != "output-stationary";
  const int64_t on_rows = ws ? k : m, streamed = ws ? m : k;
  s.folds = ceil_div(on_rows, a.rows) * ceil_div(n, a.cols);
  s.fill_cycles = (a.rows - 1) + (a.cols - 1);
  s.drain_cycles = a.rows;
  s.stream_cycles = streamed;
  s.fold_cycles = s.fill_cycles + s.stream_cycles + s.drain_cycles;
  s.cycles = double(s.folds) * double(s.fold_cycles) * double(count);
  s.utilization = double(m) * n * k * count / (double(a.rows) * a.cols * s.cycles);
  return s;
}

namespace {

// A phase's time to the bound it is under; its layout transposes only move data.
void add_by_bound(const PhaseTime& ph, double& compute_s, double& memory_s) {
  (ph.memory_bound() ? memory_s : compute_s) += std::max(ph.compute_s, ph.memory_s);
  memory_s += ph.layout_s + ph.scale_s;
}

// The fixed costs beyond the per-operator one, as the overhead lines append them.
std::string conv_call_terms(const Simulation& s) {
  std::string out = s.conv_call_s > 0 ? fmt::format(" + {:.0f} convolution phases x {:.3g} us",
                                                    s.conv_phases, s.conv_call_s * 1e6)
                                      : "";
  if (s.cell_steps > 0)
    out += fmt::format(" + {:.0f} recurrent time steps x {:.3g} us", s.cell_steps,
                       s.cell_steps_s / s.cell_steps * 1e6);
  if (s.cell_elements > 0)
    out += fmt::format(" + {:.0f} gate elements x {:.3g} ns", s.cell_elements,
                       s.cell_elements_s / s.cell_elements * 1e9);
  if (s.layer_calls_s > 0)
    out += fmt::format(" + {:.0f} elementwise layer calls x {:.3g} us", s.layer_calls,
                       s.layer_calls_s / s.layer_calls * 1e6);
  return out;
}

}  // namespace

bool known_layout(const std::string& layout) { return layout == "nhwc" || layout == "nchw"; }

const std::vector<std::string>& recipe_names() {
  static const std::vector<std::string> names = {
      "amp-fp16",        "amp-bf16",        "tf32",
      "amp-fp8@current", "amp-fp8@delayed", "amp-fp8-eager@current"};
  return names;
}

// Counted from the kernels each implementation runs, per element of a tensor `b` bytes wide.
// Transformer Engine (fused): current scaling reads the tensor once for its amax, then one
// cast-transpose kernel reads it again and writes the fp8 tensor and its transpose (1 byte
// each); delayed scaling takes the scale from the amax history and records this tensor's
// amax inside the cast-transpose, so the amax pass goes. PyTorch eager (scripts/
// measure_gpu.py's fp8 section, as torchao's tensorwise recipe runs without torch.compile):
// abs (read and write b), amax (read b), a bf16 tensor's copy to fp32 (read 2, write 4), the
// multiply by the scale in fp32 (read 4, write 4), the cast (read 4, write 1) and the
// transposed copy (read 1, write 1).
double fp8_cast_bytes(const SimFormat& f, double b) {
  if (f.eager_casts) return 3 * b + (b < 4 ? b + 4 : 0) + 8 + 5 + 2;
  return (f.scaling.rfind("current", 0) == 0 ? 2 : 1) * b + 2;
}

// Fused: amax, the scale's computation and the cast-transpose (current), or the cast-transpose
// alone (delayed). Eager: abs, amax, clamp, the scale's division (a reciprocal and a
// multiply), the multiply by the scale, the cast, the transposed copy and the scale's
// reciprocal for the GEMM; a 16-bit tensor adds its amax's and its own copies to fp32.
double fp8_cast_ops(const SimFormat& f, double b) {
  if (f.eager_casts) return 9 + (b < 4 ? 2 : 0);
  return f.scaling.rfind("current", 0) == 0 ? 3 : 1;
}

SimFormat resolve_format(const PlatformDescription& p, const std::string& format) {
  if (p.peak_tflops.empty())
    throw UsageError(fmt::format("platform '{}' states no peak FLOP/s", p.name));
  SimFormat f;
  f.name = format;
  // The key whose peak a format runs at: stated, or what the description says the hardware
  // runs it as (a TPU runs fp32 models' matrix products in bf16).
  auto runs_at = [&](const std::string& name, const std::string& key) {
    if (!key.empty() && p.peak_tflops.count(key)) return key;
    for (const std::string& k : {name, key}) {
      const auto it = p.runs_as.find(k);
      if (!k.empty() && it != p.runs_as.end()) {
        f.note =
            fmt::format("{} runs {} as {} (its description's runs_as)", p.name, name, it->second);
        return it->second;
      }
    }
    throw UsageError(fmt::format(
        "platform '{}' states no {} peak (it states {}), nor what it runs {} as (runs_as)", p.name,
        key.empty() ? name : key, stated_peaks(p), name));
  };
  if (format == "amp-fp16" || format == "amp-bf16") {
    const std::string half = format.substr(4);
    f.mixed = true;
    f.bits = 16;
    f.peak_dtype = runs_at(half, half);
    f.other_peak_dtype = runs_at("fp32", "fp32");
    f.state_bits = 32;
    return f;
  }
  if (format.rfind("amp-fp8", 0) == 0) {
    const size_t at = format.find('@');
    const std::string base = format.substr(0, at);
    if (base != "amp-fp8" && base != "amp-fp8-eager")
      throw UsageError(
          fmt::format("unknown format '{}' (mixed FP8 recipes: amp-fp8@current, amp-fp8@delayed, "
                      "amp-fp8-eager@current)",
                      format));
    if (at == std::string::npos)
      throw UsageError(
          base == "amp-fp8"
              ? fmt::format("format '{}' needs its scaling: amp-fp8@current or "
                            "amp-fp8@delayed",
                            format)
              : fmt::format("format '{}' needs its scaling: {}@current", format, base));
    num::Scaling sc;
    try {
      sc = num::parse_scaling(format.substr(at + 1), num::parse_format("e4m3"), "e4m3");
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("format '{}': {}", format, e.what()));
    }
    const bool current = sc.kind == num::Scaling::Kind::kCurrent;
    if (!current && sc.kind != num::Scaling::Kind::kDelayed)
      throw UsageError(
          fmt::format("format '{}': {} scales per tensor (current or delayed), not '{}'", format,
                      base, format.substr(at + 1)));
    if (base == "amp-fp8-eager" && !current)
      throw UsageError(fmt::format(
          "format '{}': the eager recipe is current scaling only (amp-fp8-eager@current)", format));
    f.mixed = true;
    f.bits = 16;
    f.peak_dtype = runs_at("bf16", "bf16");
    f.other_peak_dtype = runs_at("fp32", "fp32");
    f.state_bits = 32;
    f.linear_peak_dtype = runs_at("fp8", "fp8");
    f.scaling = sc.str();
    f.eager_casts = base == "amp-fp8-eager";
    return f;
  }
  if (format == "tf32") {
    f.mixed = true;
    f.peak_dtype = runs_at("tf32", "tf32");
    f.other_peak_dtype = runs_at("fp32", "fp32");
    return f;
  }
  if (const auto at = format.find('@'); at != std::string::npos) {
    // A scaling recipe on an element format: the format's peak and storage, plus its passes.
    const std::string base = format.substr(0, at);
    num::Scaling sc;
    try {
      sc = num::parse_scaling(format.substr(at + 1), num::parse_format(base), base);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("format '{}': {}", format, e.what()));
    }
    SimFormat r = resolve_format(p, base);
    r.name = format;
    r.scaling = sc.str();
    r.amax_passes = sc.kind == num::Scaling::Kind::kCurrent ? 1 : 0;
    // A float32 scale per tile of a block recipe, amortized.
    if (sc.kind == num::Scaling::Kind::kBlock) {
      const double per = 32.0 / (double(sc.block_rows) * sc.block_cols);
      r.bits += per;
      if (!r.mixed) r.state_bits += per;
    }
    return r;
  }
  bool integer = false;
  if (format == "fp64") {
    f.bits = 64;
  } else if (format == "fp8") {
    f.bits = 8;
  } else if (format == "fp4") {  // every peak_tflops key is a format name (fp8's 4-bit kin)
    f.bits = 4;
  } else {
    try {
      const num::Format nf = num::parse_format(format);
      f.bits = nf.bits_per_element();
      // NVFP4's tensor scale needs the tensor's amax before any block is cast.
      if (nf.kind == num::Format::Kind::kBlock && nf.blk.kind == num::BlockFormat::Kind::kNvfp4)
        f.amax_passes = 1;
      integer = nf.kind == num::Format::Kind::kFixed || format.find("int") != std::string::npos;
    } catch (const std::exception& e) {
      throw UsageError(
          fmt::format("unknown format '{}' (see trainbench formats; recipes: "
                      "amp-fp16, amp-bf16, tf32): {}",
                      format, e.what()));
    }
  }
  f.peak_dtype = runs_at(format, peak_key(format, f.bits, integer));
  f.other_peak_dtype = f.peak_dtype;
  f.state_bits = f.bits;
  return f;
}

const char* Simulation::bound() const {
  if (host_bound) return "host";
  if (overhead_s > std::max(memory_bound_s, compute_bound_s)) return "overhead";
  return memory_bound_s > compute_bound_s ? "memory" : "compute";
}

double LayerTime::time_s() const {
  double t = 0;
  for (const auto& ph : phases) t += ph.time_s();
  return t;
}

Simulation simulate_step(const PlatformDescription& p, const StepCost& cost,
                         double config_elem_bytes, const SimFormat& f, const SimOptions& o) {
  Simulation s;
  s.platform = p.name;
  s.format = f;
  s.peak_flops = p.peak_flops(f.peak_dtype).value_or(0) * o.peak_share;
  const std::string other = f.other_peak_dtype.empty() ? f.peak_dtype : f.other_peak_dtype;
  const double other_peak = p.peak_flops(other).value_or(0) * o.peak_share;
  s.other_peak_flops = other_peak;
  // What streaming kernels reach, not the datasheet: no read-and-write stream gets all of it.
  s.stated_bandwidth = p.bandwidth();
  s.bandwidth = p.bandwidth() * (p.efficiency ? p.efficiency->memory_fraction : 1);
  if (s.peak_flops <= 0 || other_peak <= 0 || s.bandwidth <= 0)
    throw UsageError(fmt::format("platform '{}' lacks a {} peak or a bandwidth", p.name,
                                 s.peak_flops <= 0 ? f.peak_dtype : other));
  const double width = (f.bits / 8) / config_elem_bytes;
  s.layout = o.layout;
  // Tensor-core convolutions run in NHWC: TF32 ones too (cuDNN 9 on an H200 transposed every
  // TF32 convolution's NCHW activations, data/measured/h200-sxm-141gb/profile-run1.csv).
  const bool transposes =
      o.layout == "nchw" && p.kind == "gpu" &&
      (f.peak_dtype == "fp16" || f.peak_dtype == "bf16" || f.peak_dtype == "tf32" ||
       f.peak_dtype == "fp8" || f.peak_dtype == "fp4");
  const double state_width = (f.state_bits / 8) / config_elem_bytes;
  const bool autocast = f.mixed && f.bits < 32;
  const double linear_peak = f.linear_peak_dtype.empty()
                                 ? 0
                                 : p.peak_flops(f.linear_peak_dtype).value_or(0) * o.peak_share;
  double matmul_peak = s.peak_flops;  // the layer's: a mixed FP8 recipe's linear layers differ
  auto finish = [&](PhaseTime& ph) {
    double matmul_s = ph.matmul_flops / (matmul_peak * ph.gemm_fraction);
    if (ph.mapping && ph.mapping->utilization > 0) matmul_s /= ph.mapping->utilization;
    // Work off the array (elementwise, reductions) runs at the format's peak; under a
    // mixed-precision recipe at the fp32 one.
    ph.compute_s = matmul_s + (ph.flops - ph.matmul_flops) / other_peak;
    ph.memory_s = ph.bytes / s.bandwidth;
  };
  double conv_forward_phases = 0;  // of s.conv_phases: each convolution's forward
  // A mixed FP8 recipe's cast operators (OpCount::fp8_casts), and those in forward (x and W).
  double fp8_ops = 0, fp8_forward_ops = 0;
  double fp8_weights = 0;  // their weights: cast to fp8 by the recipe, not to the half format
  // A mixed FP8 recipe's linear layers: rows and features multiples of 16 (cuBLASLt's fp8
  // GEMMs refuse others; Transformer Engine's too), but those the cost description keeps in
  // the half format (LayerCost::keep_half_in_fp8: a vocabulary projection, an MoE router).
  std::vector<bool> fp8(cost.layers.size(), false);
  for (size_t i = 0; i < cost.layers.size(); ++i) {
    const LayerCost& l = cost.layers[i];
    fp8[i] = linear_peak > 0 && l.gemm_count > 0 && l.fwd_matmul_flops > 0 && l.op == "linear" &&
             !l.keep_half_in_fp8 && l.gemm_m % 16 == 0 && l.gemm_n % 16 == 0 && l.gemm_k % 16 == 0;
  }
  // What an fp8 layer's x is cast from: the model's input as loaded (fp32) for the first layer;
  // fp32 for the linear layers right after an op autocast runs in fp32 (a norm: the run of
  // linear layers that follow it in the cost description, as q, k, v or a gate and an up
  // projection do; the cost model has no data flow, so a norm whose output is read further on,
  // a transformer encoder's by each decoder layer's cross-attention, is not followed there);
  // else the activations' width. A norm whose run is all fp8 layers has no autocast casts.
  std::vector<double> x_bytes(cost.layers.size(), f.bits / 8);
  std::vector<bool> feeds_only_fp8(cost.layers.size(), false);
  if (!cost.layers.empty()) x_bytes[0] = 4;
  for (size_t i = 0; i < cost.layers.size(); ++i) {
    if (!autocast_fp32_op(cost.layers[i].op)) continue;
    size_t j = i + 1;
    bool all = true;
    for (; j < cost.layers.size() && cost.layers[j].op == "linear"; ++j) {
      x_bytes[j] = 4;
      all = all && fp8[j];
    }
    feeds_only_fp8[i] = j > i + 1 && all;
  }
  for (size_t li = 0; li < cost.layers.size(); ++li) {
    const LayerCost& l = cost.layers[li];
    LayerTime lt{l.name, l.op, {}};
    // The cost model keeps one byte count for forward and backward; each phase the layer
    // has gets an equal share (exact to a few percent for GEMM layers, whose three phases
    // each move about W + X + Y).
    const bool has_dw = l.bwd_weight_flops > 0;
    const bool has_dx = l.bwd_input_flops > 0 || !has_dw;
    const int n = 1 + has_dx + has_dw;
    // Automatic mixed precision keeps autocast's fp32 ops (softmax, cross-entropy, layer and
    // RMS norms) and the attention's score passes in fp32 (LayerCost::fp32_bytes).
    const bool fp32_op = autocast_fp32_op(l.op);
    const double all =
        p.kind == "gpu" && l.gpu_pass_bytes > 0 ? l.gpu_pass_bytes : l.bytes_read + l.bytes_written;
    const double fp32_part = !autocast ? 0 : fp32_op ? all : std::min(all, l.fp32_bytes);
    // An op autocast runs in fp32 is bracketed by casts: its half-format input up (or, where
    // the input already is fp32, its output down for the next GEMM) and the gradient back,
    // each reading one width and writing the other. Not before fp8 linear layers alone: they
    // cast the fp32 output to fp8 themselves and return their input gradients in fp32.
    const double casts = autocast && fp32_op && !feeds_only_fp8[li]
                             ? 2 * (l.output_bytes / config_elem_bytes) * (f.bits / 8 + 4)
                             : 0;
    const double bytes =
        ((all - fp32_part) * width + fp32_part * 4 / config_elem_bytes + casts) / n;
    const bool gemm = l.gemm_count > 0 && l.fwd_matmul_flops > 0;
    const bool fp8_layer = fp8[li];
    const std::string& gemm_dtype = fp8_layer ? f.linear_peak_dtype : f.peak_dtype;
    matmul_peak = fp8_layer ? linear_peak : s.peak_flops;
    // The three GEMMs of a layer are permutations of one shape: one intensity, one fraction.
    const double eq_n = equivalent_square_n(l.gemm_m, l.gemm_n, l.gemm_k);
    const bool conv = l.op == "conv2d" || l.op == "gconv2d";
    // A dense convolution by its output rows and channels where the description measured
    // them on the threads the run uses (conv_rows: all the cores; a run on a share of them
    // keeps the one-core curve, scaled to its share); a grouped one keeps the curve at its
    // GEMM's n.
    const bool conv_table = l.op == "conv2d" && o.peak_share >= 1;
    double fraction = !gemm        ? 1
                      : conv_table ? p.conv_shape_fraction(f.peak_dtype, double(l.gemm_m),
                                                           double(l.gemm_n), double(l.gemm_k))
                      : conv       ? p.conv_fraction(f.peak_dtype, eq_n)
                             : p.gemm_shape_fraction(gemm_dtype, double(l.gemm_m), double(l.gemm_n),
                                                     double(l.gemm_k));
    // A linear layer's features (K in, N out) are leading dimensions of an operand in each of
    // its three GEMMs (x W^T, dY W, dY^T x); its rows (tokens) never are. Convolutions are
    // left alone: cuDNN pads channels itself (ResNet's 3-channel input).
    if (gemm && l.op == "linear")
      fraction *=
          p.alignment_fraction(gemm_dtype, matmul_elem_bits(gemm_dtype), {l.gemm_k, l.gemm_n});
    auto mapped = [&](int64_t m, int64_t nn, int64_t k) -> std::optional<SystolicMapping> {
      if (!gemm || !p.systolic_array) return std::nullopt;
      return map_gemm(m, nn, k, l.gemm_count, *p.systolic_array);
    };
    // Wave quantization (GPU descriptions with gemm_tiles): each phase's output, m x n, then
    // m x k (dX) and k x n (dW), reducing over k, n and m, fills the SMs in whole waves of
    // tiles.
    // A recurrent layer's time steps run one after another (each needs the last hidden
    // state), so only its weight gradient, summed over the steps, fills the SMs with all of them.
    auto waves = [&](int64_t rows, int64_t cols, int64_t depth, bool weight_gradient = false) {
      const double count = recurrent(l.op) && !weight_gradient ? 1.0 : double(l.gemm_count);
      return gemm ? p.wave_utilization(gemm_dtype, double(rows), double(cols), double(depth), count)
                  : 1.0;
    };
    PhaseTime fwd{"forward", l.fwd_flops, l.fwd_matmul_flops, bytes};
    fwd.mapping = mapped(l.gemm_m, l.gemm_n, l.gemm_k);
    if (fwd.matmul_flops > 0) fwd.gemm_fraction = fraction * waves(l.gemm_m, l.gemm_n, l.gemm_k);
    finish(fwd);
    lt.phases.push_back(fwd);
    if (has_dx) {
      // dX (M x K) = dY (M x N) W^T (N x K)
      PhaseTime dx{"backward-input", l.bwd_input_flops,
                   gemm && l.bwd_input_flops > 0 ? l.fwd_matmul_flops : 0, bytes};
      if (dx.matmul_flops > 0) {
        dx.mapping = mapped(l.gemm_m, l.gemm_k, l.gemm_n);
        dx.gemm_fraction = fraction * waves(l.gemm_m, l.gemm_k, l.gemm_n);
      }
      finish(dx);
      lt.phases.push_back(dx);
    }
    if (has_dw) {
      // dW (K x N) = X^T (K x M) dY (M x N)
      PhaseTime dw{"backward-weight", l.bwd_weight_flops, gemm ? l.fwd_matmul_flops : 0, bytes};
      if (dw.matmul_flops > 0) {
        dw.mapping = mapped(l.gemm_k, l.gemm_n, l.gemm_m);
        dw.gemm_fraction = fraction * waves(l.gemm_k, l.gemm_n, l.gemm_m, true);
      }
      finish(dw);
      lt.phases.push_back(dw);
    }
    if (gemm && f.amax_passes > 0) {
      // Each phase's two GEMM inputs (X and W; dY and W; X and dY), read again in 16 bits.
      const double m = double(l.gemm_m), nn = double(l.gemm_n), k = double(l.gemm_k);
      const double count = double(l.gemm_count) * f.amax_passes * 2 / s.bandwidth;
      const double inputs[] = {m * k + k * nn, m * nn + k * nn, m * k + m * nn};
      for (size_t i = 0; i < lt.phases.size(); ++i) {
        const std::string& name = lt.phases[i].phase;
        const size_t which = name == "forward" ? 0 : name == "backward-input" ? 1 : 2;
        lt.phases[i].scale_s = inputs[which] * count;
      }
    }
    if (fp8_layer) {
      // Forward casts x (x_bytes wide) and W (the fp32 master weights); backward dY, whose fp8
      // copy and transpose serve both backward GEMMs, as x's transpose and W's do: in the input
      // gradient's phase, or the weight gradient's where the layer has none (a first layer).
      // Separate kernels: added to the phases.
      const double m = double(l.gemm_m), nn = double(l.gemm_n), k = double(l.gemm_k),
                   x_width = x_bytes[li], dy_width = f.bits / 8, master = f.state_bits / 8,
                   count = double(l.gemm_count);
      const double fwd_s =
          count * (m * k * fp8_cast_bytes(f, x_width) + k * nn * fp8_cast_bytes(f, master)) /
          s.bandwidth;
      const double bwd_s = count * m * nn * fp8_cast_bytes(f, dy_width) / s.bandwidth;
      const std::string dy_phase = has_dx ? "backward-input" : "backward-weight";
      for (auto& ph : lt.phases) {
        if (ph.phase == "forward") ph.scale_s += fwd_s, s.fp8_cast_s += fwd_s;
        if (ph.phase == dy_phase) ph.scale_s += bwd_s, s.fp8_cast_s += bwd_s;
      }
      s.fp8_layers += 1;
      const double forward_ops = fp8_cast_ops(f, x_width) + fp8_cast_ops(f, master);
      fp8_forward_ops += count * forward_ops;
      fp8_ops += count * (forward_ops + fp8_cast_ops(f, dy_width));
      fp8_weights += count * k * nn;
    }
    if (conv) s.conv_phases += double(lt.phases.size()), conv_forward_phases += 1;
    if (transposes && conv) {
      // The weights are read (or dW written) once per phase; the rest is activations.
      const double weights = double(l.params) * config_elem_bytes * n;
      const double activations =
          std::max(0.0, l.bytes_read + l.bytes_written - weights) * width / n;
      for (auto& ph : lt.phases) ph.layout_s = 2 * activations / s.bandwidth;
    }
    // A measured elementwise rate slower than the roofline: the layer's phases share it (a
    // depthwise convolution's too: its GEMM view has no curve point near its shape).
    if (p.efficiency && l.elements > 0) {
      const auto it = p.efficiency->op_ns_per_element.find(l.op);
      if (it != p.efficiency->op_ns_per_element.end()) {
        const double total = l.elements * it->second * 1e-9 * f.bits / 32;
        for (auto& ph : lt.phases)
          ph.memory_s = std::max(ph.memory_s, total / double(lt.phases.size()));
      }
    }
    // A fp32 recurrent layer whose sizes lie on the description's table of the framework's
    // own layer: its measured time per step, spread over the phases as they were, stands in
    // for the GEMM curve's phases, its per-step operators and its gate elements (measured
    // with them). On a CPU the layer costs more than those parts: the weight gradient's
    // accumulation over the steps, the framework's per-step work (docs/platforms.md).
    if (recurrent(l.op) && p.efficiency && p.efficiency->cell_step_us.count(l.op) &&
        f.peak_dtype == "fp32" && !f.mixed && l.gemm_count > 0) {
      const int64_t gates = l.op == "lstm" ? 4 : l.op == "gru" ? 3 : 1;
      const int64_t hidden = l.gemm_n / gates, in = l.gemm_k - hidden;
      const double us =
          in == hidden ? p.cell_step_table_us(l.op, double(hidden), double(l.gemm_m)) : 0;
      if (us > 0) {
        // Measured on the run's threads (all the cores, for a host description); a run on
        // a share of them gets that share of the rate, as the GEMM peak does.
        const double total = double(l.gemm_count) * packed_share(l) * us * 1e-6 / o.peak_share,
                     was = lt.time_s();
        for (auto& ph : lt.phases) {
          ph.compute_s = was > 0 ? total * ph.time_s() / was : total / double(lt.phases.size());
          ph.memory_s = ph.layout_s = ph.scale_s = 0;
          ph.gemm_fraction = 1;
          ph.mapping.reset();
        }
        lt.step_us = us;
        s.table_layers.insert(l.name);
      }
    }
    s.layers.push_back(std::move(lt));
  }
  matmul_peak = s.peak_flops;
  // Under automatic mixed precision the optimizer updates fp32 weights, and the weights are
  // cast to the half format once a step (read 4, write 2 bytes each): not those a mixed FP8
  // recipe casts to fp8 (counted with its casts).
  const double casts =
      f.mixed && f.bits < f.state_bits ? (double(cost.params) - fp8_weights) * (4 + 2) : 0;
  // On a GPU the frameworks' default update is multi-tensor (torch.optim's foreach, the
  // default on CUDA since PyTorch 2.0): each of its operations sweeps every parameter before
  // the next starts, so every pass comes from memory. On a CPU the update loops over the
  // parameters one at a time, and one tensor's later passes find it in cache
  // (docs/numerics.md, "Simulation phase").
  const double opt_bytes = p.kind == "gpu" ? cost.opt_pass_bytes : cost.opt_bytes;
  PhaseTime opt{"optimizer", cost.opt_flops, 0, opt_bytes * state_width + casts};
  finish(opt);
  // A CPU's measured optimizer step (trainbench platform) in the parameters' dtype: its passes
  // cost arithmetic and conversions as much as bytes, so a bf16 update is no faster than an
  // fp32 one there. On `threads` of `cores` cores, that share of the measured rate.
  // Mixed precision keeps the state in fp32 and casts the weights besides (not in the rate).
  if (p.kind == "cpu" && p.efficiency && cost.opt_params > 0) {
    const std::string state = f.mixed ? "fp32" : f.peak_dtype;
    const auto d = p.efficiency->optimizer_ns_per_param.find(state);
    if (d != p.efficiency->optimizer_ns_per_param.end()) {
      const auto it = d->second.find(cost.optimizer);
      if (it != d->second.end()) {
        // ATen splits an elementwise pass over threads only from kAtenGrainElements up
        // (at::internal::GRAIN_SIZE): a smaller parameter tensor's update runs on one thread,
        // at that thread's share of the rate measured over large tensors on all of them (on 2
        // cores a 10000-element RMSprop update took 1.9x per element what a 2M one did). A
        // layer's parameters count as one tensor (a bias is small beside its weight), a
        // recurrent layer's as two (its input and hidden weights).
        const double threads = std::max(1.0, o.peak_share * double(std::max(1, p.cores)));
        double serial = 0, trainable = 0;  // serial: in tensors below the grain
        for (const auto& l : cost.layers) {
          const double t = double(l.params - l.frozen_params);
          trainable += std::max(0.0, t);
          if (t > 0 && t / (recurrent(l.op) ? 2 : 1) < kAtenGrainElements) serial += t;
        }
        const double serial_share = trainable > 0 ? serial / trainable : 0;
        const double rate =
            cost.opt_params * it->second * 1e-9 / o.peak_share * (1 + serial_share * (threads - 1));
        // The update's working set: weights, gradients and state. The rate was measured over
        // kOptimizerMeasuredParams parameters (the same bytes each), in the cache that holds
        // those; a step whose set spills further runs at its own level's bandwidth. With the
        // working-set curve the rate is moved between the two levels, and it replaces the
        // byte count at main memory's bandwidth, which puts a set that fits a cache (2M
        // parameters of RMSprop: 34 MB) at twice its measured time. Never below the measured
        // rate: a smaller set's passes cost the same arithmetic. Without a curve nothing says
        // where the caches end: the byte count stays a floor.
        const double ws = (cost.memory.weights + cost.memory.gradients +
                           cost.memory.optimizer_state) *
                          state_width,
                     measured_ws = ws / cost.opt_params * kOptimizerMeasuredParams;
        const double here = p.working_set_gbps(ws), there = p.working_set_gbps(measured_ws);
        opt.memory_s = here > 0 && there > 0
                           ? rate * std::max(1.0, there / here) + casts / s.bandwidth
                           : std::max(opt.memory_s, rate + casts / s.bandwidth);
      }
    }
  }
  s.layers.push_back({"optimizer", "optimizer", {opt}});
  for (const auto& l : s.layers)
    for (const auto& ph : l.phases) {
      const double t = ph.time_s();
      s.step_s += t;
      s.phase_s[ph.phase] += t;
      s.phase_total_s[ph.phase == "forward" || ph.phase == "optimizer" ? ph.phase : "backward"] +=
          t;
      s.layout_s += ph.layout_s;
      s.scale_s += ph.scale_s;
      add_by_bound(ph, s.compute_bound_s, s.memory_bound_s);
    }
  // Added, not overlapped: on a CPU the thread that dispatches an operator then waits for it;
  // on a GPU back-to-back kernels each pay a start-up time on top of their work (t = a + V/b
  // fits small-kernel measurements; docs/platforms.md).
  if (p.efficiency) {
    s.ops = count_operators(cost, p.efficiency->cell_step_us, p.kind == "gpu");
    // Per parameter tensor as count_operators counts them (weight and bias): a bias-free
    // layer gets two casts too many, a tied output layer (no parameters of its own) none.
    // An fp8 linear layer's weight and its gradient are not cast (the recipe reads the fp32
    // weight and writes dW in fp32), nor its bias's gradient (it comes back in fp32): of the
    // count above, the weight's two and, where it has one, the bias's backward one go.
    if (autocast)
      for (size_t i = 0; i < cost.layers.size(); ++i) {
        const LayerCost& l = cost.layers[i];
        if (l.gemm_count > 0 && l.fwd_matmul_flops > 0 && l.params > 0)
          s.ops.casts += 2 * (recurrent(l.op) ? 4 : 2) -
                         (fp8[i] ? 2 + (l.params > l.gemm_k * l.gemm_n ? 1 : 0) : 0);
      }
    s.ops.fp8_casts = fp8_ops;
    s.op_overhead_s = p.efficiency->op_overhead_us * 1e-6;
    s.overhead_s = s.ops.total() * s.op_overhead_s;
    s.conv_call_s = p.efficiency->conv_call_us * 1e-6;
    s.overhead_s += s.conv_phases * s.conv_call_s;
    // The forward phase's share of a layer's time: where its fixed costs, measured forward and
    // backward together, are put when the step is split by phase.
    std::map<std::string, const LayerTime*> timed;
    for (const auto& lt : s.layers) timed.emplace(lt.name, &lt);
    const auto forward_share = [&](const std::string& name) {
      const auto it = timed.find(name);
      if (it == timed.end() || !(it->second->time_s() > 0) || it->second->phases.empty())
        return 1.0 / 3;
      return it->second->phases.front().time_s() / it->second->time_s();
    };
    double fixed_forward_s = 0, fixed_backward_s = 0;  // the cells' and the layers' calls
    for (const auto& l : cost.layers) {
      if (!recurrent(l.op) || s.table_layers.count(l.name)) continue;
      const double cell_s_before = s.cell_steps_s + s.cell_elements_s;
      const double steps = double(std::max<int64_t>(1, l.gemm_count));
      const auto it = p.efficiency->cell_step_us.find(l.op);
      if (it != p.efficiency->cell_step_us.end()) {
        s.cell_steps += steps;
        s.cell_steps_s += steps * it->second * 1e-6;
      }
      // The gates' elementwise work: batch x gates x hidden elements per time step, the
      // per-step GEMM's output (gemm_m x gemm_n). On a CPU these small strided passes take
      // several times what the elementwise FLOPs at the peak would.
      const auto el = p.efficiency->cell_ns_per_element.find(l.op);
      if (el != p.efficiency->cell_ns_per_element.end()) {
        const double elements = steps * packed_share(l) * double(l.gemm_m) * double(l.gemm_n);
        s.cell_elements += elements;
        s.cell_elements_s += elements * el->second * 1e-9;
      }
      const double added = s.cell_steps_s + s.cell_elements_s - cell_s_before,
                   share = forward_share(l.name);
      fixed_forward_s += added * share;
      fixed_backward_s += added * (1 - share);
    }
    // An elementwise layer's call costs more than its operators' dispatch and its elements:
    // ATen's sub-operators (a training batchnorm's statistics, running averages, its three
    // gradients), the parallel regions it opens whatever its size, its autograd nodes. The
    // description's layer_call_us measured that whole on a tiny tensor; what this model counts
    // for such a layer elsewhere (its elements at op_ns_per_element, its operators at
    // op_overhead_s as count_operators counts them: one forward, one per gradient, two
    // gradient accumulations for its parameters) is taken out, so it is not counted twice.
    for (const auto& l : cost.layers) {
      const auto call = p.efficiency->layer_call_us.find(l.op);
      if (call == p.efficiency->layer_call_us.end()) continue;
      const auto ns = p.efficiency->op_ns_per_element.find(l.op);
      const double elements_us = ns != p.efficiency->op_ns_per_element.end()
                                     ? call->second.elements * ns->second * 1e-3
                                     : 0;
      // The elements' time is shared by the layer's phases, as above: the forward has one.
      const auto it = timed.find(l.name);
      const double phases =
          it == timed.end() ? 1 : std::max<double>(1, double(it->second->phases.size()));
      const double backward_ops =
          (l.bwd_input_flops > 0) + (l.bwd_weight_flops > 0) + (l.params > 0 ? 2 : 0);
      const double op_us = s.op_overhead_s * 1e6;
      const double fwd = std::max(0.0, call->second.forward - elements_us / phases - op_us),
                   bwd = std::max(0.0, call->second.backward - elements_us * (phases - 1) / phases -
                                           backward_ops * op_us);
      s.layer_calls += 1;
      s.layer_calls_s += (fwd + bwd) * 1e-6;
      fixed_forward_s += fwd * 1e-6;
      fixed_backward_s += bwd * 1e-6;
    }
    s.overhead_s += s.cell_steps_s + s.cell_elements_s + s.layer_calls_s;
    s.step_s += s.overhead_s;
    // A mixed FP8 recipe's casts: x's and W's in forward, dY's in backward.
    const double casts_half = s.ops.casts / 2 * s.op_overhead_s,
                 fp8_forward = fp8_forward_ops * s.op_overhead_s;
    s.phase_total_s["forward"] += s.ops.forward * s.op_overhead_s + casts_half + fp8_forward +
                                  conv_forward_phases * s.conv_call_s + fixed_forward_s;
    s.phase_total_s["backward"] += s.ops.backward * s.op_overhead_s + casts_half +
                                   (s.ops.fp8_casts * s.op_overhead_s - fp8_forward) +
                                   (s.conv_phases - conv_forward_phases) * s.conv_call_s +
                                   fixed_backward_s;
    s.phase_total_s["optimizer"] += s.ops.optimizer * s.op_overhead_s;
    if (p.efficiency->host_op_us > 0 || p.efficiency->host_step_us > 0) {
      s.host_step_s = p.efficiency->host_step_us * 1e-6;
      s.host_s = s.host_step_s + s.ops.total() * p.efficiency->host_op_us * 1e-6;
    }
    if (s.host_s > s.step_s) {
      s.host_bound = true;
      s.step_s = s.host_s;
      s.phase_total_s.clear();  // the host's dispatch, not split by phase
    }
  }
  // Inputs stay as loaded; weights, gradients and optimizer state at the state's width (fp32
  // under a recipe), activations at the format's.
  const MemoryEstimate& m = cost.memory;
  const double state = m.weights + m.gradients + m.optimizer_state;
  s.memory_bytes = state * state_width + (m.total() - m.inputs - state) * width + m.inputs;
  if (autocast)
    for (const auto& l : cost.layers) {
      // An fp32 op's saved tensors at 4 bytes instead of the half format's; the attention's
      // probabilities at 4 bytes besides their half copy (counted above at the format's width).
      const double fp32 = 4 / config_elem_bytes;
      if (autocast_fp32_op(l.op))
        s.memory_bytes += l.saved_bytes * (fp32 - width);
      else
        s.memory_bytes += std::min(l.saved_bytes, l.fp32_saved_bytes) * fp32;
    }
  s.capacity_bytes = p.memory_gb * 1e9;
  if (cost.data_parallel.workers > 1) {
    s.workers = cost.data_parallel.workers;
    s.zero = cost.data_parallel.zero;
    s.comm_bytes_ideal = cost.data_parallel.ideal_bytes_per_step * state_width;
    s.comm_bytes_run = cost.data_parallel.run_bytes_per_step * state_width;
  }
  if (s.capacity_bytes > 0 && s.memory_bytes > s.capacity_bytes) s.status = "oom-predicted";
  return s;
}

Simulation simulate_config(const PlatformDescription& p, const Config& config,
                           const std::string& format, const SimOptions& o) {
  const std::string dtype = config.has("dtype") ? config.get("dtype") : "fp32";
  std::string chosen = format;
  if (chosen.empty() && config.has("numerics"))
    chosen = num::parse_numerics(config.get("numerics")).compute_format();
  const SimFormat f = resolve_format(p, chosen.empty() ? dtype : chosen);
  Simulation s = simulate_step(p, step_cost(config), double(dtype_bytes(dtype)), f, o);
  s.config = config.str();
  return s;
}

namespace {

std::vector<const LayerTime*> top(const Simulation& s, size_t n) {
  std::vector<const LayerTime*> v;
  for (const auto& l : s.layers) v.push_back(&l);
  std::stable_sort(v.begin(), v.end(), [](const LayerTime* a, const LayerTime* b) {
    return a->time_s() > b->time_s();
  });
  if (v.size() > n) v.resize(n);
  return v;
}

nlohmann::json mapping_json(const SystolicMapping& m) {
  return {{"folds", m.folds},
          {"fold_cycles", m.fold_cycles},
          {"fill_cycles", m.fill_cycles},
          {"drain_cycles", m.drain_cycles},
          {"stream_cycles", m.stream_cycles},
          {"cycles", m.cycles},
          {"utilization", m.utilization}};
}

}  // namespace

nlohmann::json to_json(const Simulation& s, size_t top_layers) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layers) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& ph : l.phases) {
      nlohmann::json j = {{"phase", ph.phase},
                          {"flops", ph.flops},
                          {"matmul_flops", ph.matmul_flops},
                          {"bytes", ph.bytes},
                          {"compute_s", ph.compute_s},
                          {"memory_s", ph.memory_s},
                          {"time_s", ph.time_s()},
                          {"bound", ph.memory_bound() ? "memory" : "compute"}};
      if (ph.mapping) j["systolic"] = mapping_json(*ph.mapping);
      if (ph.matmul_flops > 0) j["gemm_fraction"] = ph.gemm_fraction;
      phases.push_back(j);
    }
    layers.push_back({{"name", l.name}, {"op", l.op}, {"time_s", l.time_s()}, {"phases", phases}});
    if (l.step_us > 0) layers.back()["measured_step_us"] = l.step_us;
  }
  nlohmann::json topj = nlohmann::json::array();
  for (const auto* l : top(s, top_layers)) topj.push_back(l->name);
  return {
      {"platform", s.platform},
      {"config", s.config},
      {"format",
       {{"name", s.format.name},
        {"bits", s.format.bits},
        {"peak_dtype", s.format.peak_dtype},
        {"other_peak_dtype", s.format.other_peak_dtype},
        {"state_bits", s.format.state_bits},
        {"recipe", s.format.mixed},
        {"linear_peak_dtype", s.format.linear_peak_dtype},
        {"eager_casts", s.format.eager_casts},
        {"note", s.format.note}}},
      {"status", s.status},
      {"peak_flops", s.peak_flops},
      {"bandwidth", s.bandwidth},
      {"step_s", s.step_s},
      {"compute_bound_s", s.compute_bound_s},
      {"memory_bound_s", s.memory_bound_s},
      {"overhead_s", s.overhead_s},
      {"op_overhead_s", s.op_overhead_s},
      {"host_s", s.host_s},
      {"host_step_s", s.host_step_s},
      {"host_bound", s.host_bound},
      {"conv_phases", s.conv_phases},
      {"conv_call_s", s.conv_call_s},
      {"cell_steps", s.cell_steps},
      {"cell_steps_s", s.cell_steps_s},
      {"phase_total_s", s.phase_total_s},
      {"layer_calls", s.layer_calls},
      {"layer_calls_s", s.layer_calls_s},
      {"cell_elements", s.cell_elements},
      {"cell_elements_s", s.cell_elements_s},
      {"layout", s.layout},
      {"layout_s", s.layout_s},
      {"scaling", s.format.scaling},
      {"amax_passes", s.format.amax_passes},
      {"scale_s", s.scale_s},
      {"fp8_layers", s.fp8_layers},
      {"fp8_cast_s", s.fp8_cast_s},
      {"operators",
       {{"forward", s.ops.forward},
        {"backward", s.ops.backward},
        {"optimizer", s.ops.optimizer},
        {"casts", s.ops.casts},
        {"fp8_casts", s.ops.fp8_casts},
        {"total", s.ops.total()}}},
      {"phase_s", s.phase_s},
      {"memory_bytes", s.memory_bytes},
      {"capacity_bytes", s.capacity_bytes},
      {"data_parallel", s.workers > 1 ? nlohmann::json{{"workers", s.workers},
                                                       {"zero", s.zero},
                                                       {"bytes_per_step_ideal", s.comm_bytes_ideal},
                                                       {"bytes_per_step_as_run", s.comm_bytes_run}}
                                      : nlohmann::json(nullptr)},
      {"top_layers", topj},
      {"layers", layers}};
}

namespace {
std::string class_of(const std::string& op) {
  if (op == "linear" || op == "embedding") return "matmul";
  if (op == "conv2d" || op == "gconv2d") return "conv";
  if (recurrent(op)) return "recurrent";
  if (op == "attention") return "attention";
  if (op == "optimizer") return "optimizer";
  return "elementwise";
}

std::string efficiency_source(const PlatformDescription& p) {
  if (!p.efficiency) return "none stated: the pure roofline (fraction 1, no overhead)";
  const auto at = p.extra.find("measured_at");
  return at != p.extra.end() && at->is_string()
             ? "measured by trainbench platform at " + at->get<std::string>() +
                   " (micro-benchmarks, not the runs predicted)"
             : "stated in the description (source: " + p.source + ")";
}
}  // namespace

std::vector<ClassTime> explain(const Simulation& s) {
  std::map<std::string, ClassTime> by;
  std::map<std::string, double> gemm_time;
  for (const auto& l : s.layers) {
    ClassTime& c = by[class_of(l.op)];
    c.op_class = class_of(l.op);
    for (const auto& ph : l.phases) {
      const double t = ph.time_s();
      c.time_s += t;
      add_by_bound(ph, c.compute_bound_s, c.memory_bound_s);
      c.flops += ph.flops;
      c.bytes += ph.bytes;
      if (ph.matmul_flops > 0) {
        gemm_time[c.op_class] += t;
        c.gemm_fraction += ph.gemm_fraction * t;
        if (ph.mapping) c.array_utilization += ph.mapping->utilization * t;
      }
    }
  }
  std::vector<ClassTime> out;
  for (auto& [k, c] : by) {
    if (gemm_time[k] > 0) c.gemm_fraction /= gemm_time[k], c.array_utilization /= gemm_time[k];
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const ClassTime& a, const ClassTime& b) { return a.time_s > b.time_s; });
  return out;
}

std::string format_explanation(const Simulation& s, const PlatformDescription& p) {
  std::ostringstream o;
  const double t = s.step_s > 0 ? s.step_s : 1;
  o << fmt::format("why {:.4g} ms: time by layer class and bound\n", s.step_s * 1e3);
  o << fmt::format("  {:<12} {:>10} {:>6} {:>10} {:>10} {:>9} {:>9}\n", "class", "ms", "share",
                   "compute", "memory", "GEMM eff", "array");
  for (const auto& c : explain(s))
    o << fmt::format(
        "  {:<12} {:>10.4g} {:>5.1f}% {:>9.1f}% {:>9.1f}% {:>9} {:>9}\n", c.op_class,
        c.time_s * 1e3, 100 * c.time_s / t, c.time_s > 0 ? 100 * c.compute_bound_s / c.time_s : 0.0,
        c.time_s > 0 ? 100 * c.memory_bound_s / c.time_s : 0.0,
        c.gemm_fraction > 0 ? fmt::format("{:.1f}%", 100 * c.gemm_fraction) : "-",
        c.array_utilization > 0 ? fmt::format("{:.1f}%", 100 * c.array_utilization) : "-");
  if (s.layout_s > 0)
    o << fmt::format(
        "  of which {:.4g} ms ({:.1f}%) in NCHW <-> NHWC transposes around the convolutions "
        "(--layout nchw; cuDNN runs them on tensor cores in NHWC)\n",
        s.layout_s * 1e3, 100 * s.layout_s / t);
  if (s.overhead_s > 0)
    o << fmt::format("  {:<12} {:>10.4g} {:>5.1f}%  ({:.0f} operators x {:.3g} us{})\n", "overhead",
                     s.overhead_s * 1e3, 100 * s.overhead_s / t, s.ops.total(),
                     s.op_overhead_s * 1e6, conv_call_terms(s));
  if (s.host_bound)
    o << fmt::format(
        "  host-bound: the host's {:.4g} ms per step ({:.0f} operators, host_op_us, host_step_us) "
        "is longer than the device's work; the step is the host's time\n",
        s.host_s * 1e3, s.ops.total());
  o << fmt::format(
      "compute: matrix products at the {} peak, {:.4g} TFLOP/s; other arithmetic at the {} "
      "peak, {:.4g} TFLOP/s (description: {})\n",
      s.format.peak_dtype, s.peak_flops / 1e12,
      s.format.other_peak_dtype.empty() ? s.format.peak_dtype : s.format.other_peak_dtype,
      s.other_peak_flops / 1e12, p.name);
  if (!s.format.linear_peak_dtype.empty())
    o << fmt::format(
        "fp8: the {} eligible linear layers' matrix products at the {} peak, {:.4g} TFLOP/s, and "
        "its GEMM curve; their casts {:.4g} ms\n",
        s.fp8_layers, s.format.linear_peak_dtype,
        p.peak_flops(s.format.linear_peak_dtype).value_or(0) / 1e12, s.fp8_cast_s * 1e3);
  o << fmt::format(
      "memory: {:.4g} GB/s{}; bytes at {} bits for activations, {} for weights, "
      "gradients and optimizer state\n",
      s.bandwidth / 1e9,
      p.efficiency && p.efficiency->memory_fraction != 1
          ? fmt::format(" ({:.0f}% of the stated {:.4g} GB/s, as streaming kernels reach)",
                        100 * p.efficiency->memory_fraction, p.memory_bandwidth_gbps)
          : "",
      s.format.bits, s.format.state_bits);
  o << "GEMM efficiency and per-operator overhead: " << efficiency_source(p) << "\n";
  if (p.efficiency && p.efficiency->gemm_tiles.count(s.format.peak_dtype))
    o << fmt::format(
        "GEMM eff includes wave quantization: each phase's output tiles fill the {} units in "
        "whole waves ({} tile shapes for {}, split-K up to 16; docs/platforms.md, gemm_tiles)\n",
        p.cores, p.efficiency->gemm_tiles.at(s.format.peak_dtype).size(), s.format.peak_dtype);
  if (p.efficiency && p.efficiency->gemm_rows.count(s.format.peak_dtype))
    o << fmt::format(
        "GEMM eff of layers other than convolutions: {} points of a linear layer's GEMMs at batch "
        "rows for {}, read at each product's smallest dimension (docs/platforms.md, gemm_rows)\n",
        p.efficiency->gemm_rows.at(s.format.peak_dtype).size(), s.format.peak_dtype);
  if (p.efficiency && p.efficiency->conv_rows.count(s.format.peak_dtype))
    o << fmt::format(
        "GEMM eff of dense convolutions: {} points of 3x3 convolutions on the run's threads for "
        "{}, read at each one's output rows and channels (docs/platforms.md, conv_rows; a run on "
        "a share of the cores takes the conv curve)\n",
        p.efficiency->conv_rows.at(s.format.peak_dtype).size(), s.format.peak_dtype);
  if (!s.table_layers.empty())
    o << fmt::format(
        "recurrent layers timed as the framework's layer measured per time step at their hidden "
        "and batch sizes ({} of them; docs/platforms.md, cell_step_table), not from GEMMs\n",
        s.table_layers.size());
  if (p.systolic_array)
    o << fmt::format("array: {} x {} {} (folds, fill and drain per GEMM)\n", p.systolic_array->rows,
                     p.systolic_array->cols, p.systolic_array->dataflow);
  return o.str();
}

nlohmann::json explanation_json(const Simulation& s, const PlatformDescription& p) {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : explain(s))
    classes.push_back({{"class", c.op_class},
                       {"time_s", c.time_s},
                       {"compute_bound_s", c.compute_bound_s},
                       {"memory_bound_s", c.memory_bound_s},
                       {"flops", c.flops},
                       {"bytes", c.bytes},
                       {"gemm_fraction", c.gemm_fraction},
                       {"array_utilization", c.array_utilization}});
  return {{"classes", classes},
          {"overhead_s", s.overhead_s},
          {"host_s", s.host_s},
          {"host_bound", s.host_bound},
          {"efficiency_source", efficiency_source(p)}};
}

std::string format_simulation(const Simulation& s, size_t top_layers) {
  std::ostringstream o;
  // The bandwidth the model uses, and the stated one where it is a share of it (the peak is
  // the stated one; its achievable share is per GEMM shape, in the layer table).
  o << fmt::format("{} on {} in {} ({} bits, {} peak {:.4g} TFLOP/s, {:.4g} GB/s{})\n", s.config,
                   s.platform, s.format.name, s.format.bits, s.format.peak_dtype,
                   s.peak_flops / 1e12, s.bandwidth / 1e9,
                   s.stated_bandwidth > s.bandwidth * (1 + 1e-9)
                       ? fmt::format(" attainable of the stated {:.4g}", s.stated_bandwidth / 1e9)
                       : "");
  if (s.format.mixed)
    o << fmt::format(
        "recipe: matrix products at the {} peak, other arithmetic at the {} peak ({:.4g} "
        "TFLOP/s), activations in {} bits, weights, gradients and optimizer state in {}\n",
        s.format.peak_dtype, s.format.other_peak_dtype, s.other_peak_flops / 1e12, s.format.bits,
        s.format.state_bits);
  if (!s.format.linear_peak_dtype.empty())
    o << fmt::format(
        "fp8: {} linear layers' GEMMs at the {} peak (e4m3 forward, e5m2 gradients), {} scaling "
        "per tensor; {:.4g} ms of casts ({} kernels: x, W and dY, each with its transpose)\n",
        s.fp8_layers, s.format.linear_peak_dtype, s.format.scaling, s.fp8_cast_s * 1e3,
        s.format.eager_casts ? "PyTorch's eager" : "Transformer Engine's fused");
  if (!s.format.note.empty()) o << "note: " << s.format.note << "\n";
  o << fmt::format("predicted step time: {:.4g} ms{}\n", s.step_s * 1e3,
                   s.status == "ok" ? "" : "  (" + s.status + ")");
  o << fmt::format("memory: {:.3g} GB of {:.3g} GB{}\n", s.memory_bytes / 1e9,
                   s.capacity_bytes / 1e9, s.workers > 1 ? " per worker" : "");
  if (s.workers > 1)
    o << fmt::format(
        "data parallel: {} workers, ZeRO stage {}: each sends {:.4g} MB per step (ring "
        "collectives, Rajbhandari et al. 2020){}; not in the step time (no interconnect "
        "described)\n",
        s.workers, s.zero, s.comm_bytes_ideal / 1e6,
        s.comm_bytes_run > 0
            ? fmt::format(", {:.4g} MB as trainbench runs it on Gloo", s.comm_bytes_run / 1e6)
            : "");
  const double t = s.step_s > 0 ? s.step_s : 1;
  // Host-bound, the device's shares do not fill the step: the host's dispatch does, and the
  // line says so rather than leave shares summing to less than 100%.
  o << fmt::format(
      "bound: compute {:.1f}%, memory {:.1f}%, overhead {:.1f}%{}\n", 100 * s.compute_bound_s / t,
      100 * s.memory_bound_s / t, 100 * s.overhead_s / t,
      s.host_bound
          ? fmt::format(
                " of the step; the device idles {:.1f}% waiting for "
                "the host (host-bound: a faster device changes "
                "nothing)",
                100 * std::max(0.0, 1 - (s.compute_bound_s + s.memory_bound_s + s.overhead_s) / t))
          : "");
  if (s.layout_s > 0)
    o << fmt::format("layout: nchw, {:.4g} ms of transposes around tensor-core convolutions\n",
                     s.layout_s * 1e3);
  if (s.scale_s > s.fp8_cast_s)
    o << fmt::format(
        "scaling: {}, {:.4g} ms of amax passes (each GEMM input read again in 16 bits before "
        "its cast)\n",
        s.format.scaling.empty() ? s.format.name : s.format.scaling, s.scale_s * 1e3);
  if (s.op_overhead_s > 0)
    o << fmt::format(
        "overhead: {:.0f} operators (forward {:.0f}, backward {:.0f}, optimizer {:.0f}{}) x {:.3g} "
        "us{} = {:.4g} ms\n",
        s.ops.total(), s.ops.forward, s.ops.backward, s.ops.optimizer,
        (s.ops.casts > 0 ? fmt::format(", autocast's casts {:.0f}", s.ops.casts) : "") +
            (s.ops.fp8_casts > 0 ? fmt::format(", fp8 casts {:.0f}", s.ops.fp8_casts) : ""),
        s.op_overhead_s * 1e6, conv_call_terms(s), s.overhead_s * 1e3);
  if (s.host_s > 0)
    o << fmt::format(
        "host: {}{:.0f} operators x {:.3g} us = {:.4g} ms of dispatch, overlapping the device's "
        "work{}\n",
        s.host_step_s > 0 ? fmt::format("{:.3g} ms per step + ", s.host_step_s * 1e3) : "",
        s.ops.total(), (s.host_s - s.host_step_s) / std::max(1.0, s.ops.total()) * 1e6,
        s.host_s * 1e3, s.host_bound ? "; the step waits for it (host-bound)" : "");
  o << "phases:";
  for (const char* ph : {"forward", "backward-input", "backward-weight", "optimizer"})
    if (s.phase_s.count(ph)) o << fmt::format(" {} {:.1f}%", ph, 100 * s.phase_s.at(ph) / t);
  o << "\n\n";
  o << fmt::format("{:<32} {:<12} {:>10} {:>7}  {}\n", "layer", "op", "ms", "share",
                   "per phase: ms, bound, array utilization, GEMM fraction of peak");
  for (const auto* l : top(s, top_layers)) {
    std::string detail;
    for (const auto& ph : l->phases) {
      detail += fmt::format("{}{} {:.3g} {}", detail.empty() ? "" : "; ",
                            ph.phase == "forward"           ? "fwd"
                            : ph.phase == "backward-input"  ? "dx"
                            : ph.phase == "backward-weight" ? "dw"
                                                            : "opt",
                            ph.time_s() * 1e3, ph.memory_bound() ? "mem" : "cmp");
      if (ph.mapping)
        detail +=
            fmt::format(" {:.0f}% ({} folds)", 100 * ph.mapping->utilization, ph.mapping->folds);
      if (ph.gemm_fraction < 1) detail += fmt::format(" gemm {:.0f}%", 100 * ph.gemm_fraction);
    }
    if (l->step_us > 0)
      detail += fmt::format(" (the layer as measured: {:.3g} us per time step)", l->step_us);
    o << fmt::format("{:<32} {:<12} {:>10.4g} {:>6.1f}%  {}\n", l->name, l->op, l->time_s() * 1e3,
                     100 * l->time_s() / t, detail);
  }
  return o.str();
}

}  // namespace tb::sim
