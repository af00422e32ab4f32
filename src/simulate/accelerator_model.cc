#include "simulate/accelerator_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/errors.h"
#include "numerics/format.h"
#include "numerics/policy.h"

namespace tb::sim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The peak a format of `bits` would run at, most specific first. Integer and fixed-point
// formats prefer int8; block formats count as their elements.
std::vector<std::string> peak_candidates(const std::string& name, double bits, bool integer) {
  std::vector<std::string> c;
  for (const char* d : {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8"})
    if (name == d) c.push_back(d);
  if (bits <= 8.5) {
    if (integer) c.push_back("int8");
    c.insert(c.end(), {"fp8", "int8", "bf16", "fp16", "fp32"});
  } else if (bits <= 16.5) {
    c.insert(c.end(), {"bf16", "fp16", "fp32"});
  } else if (bits <= 32.5) {
    c.insert(c.end(), {"fp32", "tf32", "fp64"});
  } else {
    c.insert(c.end(), {"fp64", "fp32"});
  }
  return c;
}

bool recurrent(const std::string& op) { return op == "rnn" || op == "lstm" || op == "gru"; }

// LibTorch's CPU cells per time step, the input projection done once for the sequence:
// tanh: hidden projection, add, tanh; LSTM: projection, add, chunk, 3 sigmoid, 2 tanh,
// 3 mul, add; GRU: two projections, two chunks, 2 sigmoid, tanh and 7 mul/add/sub.
double cell_operators(const std::string& op) { return op == "lstm" ? 12 : op == "gru" ? 14 : 3; }

}  // namespace

OpCount count_operators(const StepCost& cost) {
  OpCount c;
  double tensors = 0;
  for (const auto& l : cost.layers) {
    const double fwd =
        recurrent(l.op) ? std::max<int64_t>(1, l.gemm_count) * cell_operators(l.op) : 1;
    c.forward += fwd;
    c.backward += fwd * ((l.bwd_input_flops > 0) + (l.bwd_weight_flops > 0));
    if (l.params > 0) tensors += recurrent(l.op) ? 4 : 2;
  }
  // The optimizers' in-place updates do about 2 FLOPs per element each (SGD: 1 update of 2
  // FLOPs, RMSprop: 11 FLOPs in 5 to 6 updates); optimizer_updates > 1 is folded in.
  const double per_param = cost.params > 0 ? cost.opt_flops / double(cost.params) : 0;
  const double updates = per_param > 0 ? std::max(1.0, std::round(per_param / 2)) : 0;
  c.backward += tensors;                  // AccumulateGrad
  c.optimizer = tensors * (updates + 1);  // + zero_grad
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

SimFormat resolve_format(const PlatformDescription& p, const std::string& format) {
  SimFormat f;
  f.name = format;
  bool integer = false;
  if (format == "fp64") {
    f.bits = 64;
  } else if (format == "tf32") {
    f.bits = 32;  // stored as fp32
  } else if (format == "fp8") {
    f.bits = 8;
  } else {
    try {
      const num::Format nf = num::parse_format(format);
      f.bits = nf.bits_per_element();
      integer = nf.kind == num::Format::Kind::kFixed || format.find("int") != std::string::npos;
    } catch (const std::exception& e) {
      throw UsageError(
          fmt::format("unknown format '{}' (see trainbench formats): {}", format, e.what()));
    }
  }
  if (p.peak_tflops.empty())
    throw UsageError(fmt::format("platform '{}' states no peak FLOP/s", p.name));
  for (const auto& d : peak_candidates(format, f.bits, integer))
    if (p.peak_tflops.count(d)) {
      f.peak_dtype = d;
      break;
    }
  if (f.peak_dtype.empty()) {  // the slowest stated peak: never flatter the accelerator
    f.peak_dtype = p.peak_tflops.begin()->first;
    for (const auto& [d, tf] : p.peak_tflops)
      if (tf < p.peak_tflops.at(f.peak_dtype)) f.peak_dtype = d;
  }
  const bool exact = f.peak_dtype == format || (format == "e4m3" && f.peak_dtype == "fp8") ||
                     (format == "e5m2" && f.peak_dtype == "fp8");
  if (!exact)
    f.note = fmt::format("{} states no {} peak: using its {} peak for {} ({} bits)", p.name, format,
                         f.peak_dtype, format, f.bits);
  return f;
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
  s.bandwidth = p.bandwidth();
  if (s.peak_flops <= 0 || s.bandwidth <= 0)
    throw UsageError(
        fmt::format("platform '{}' lacks a {} peak or a bandwidth", p.name, f.peak_dtype));
  const double width = (f.bits / 8) / config_elem_bytes;
  auto finish = [&](PhaseTime& ph) {
    double matmul_s = ph.matmul_flops / (s.peak_flops * ph.gemm_fraction);
    if (ph.mapping && ph.mapping->utilization > 0) matmul_s /= ph.mapping->utilization;
    // Work off the array (elementwise, reductions) runs at the format's peak.
    ph.compute_s = matmul_s + (ph.flops - ph.matmul_flops) / s.peak_flops;
    ph.memory_s = ph.bytes / s.bandwidth;
  };
  for (const auto& l : cost.layers) {
    LayerTime lt{l.name, l.op, {}};
    // The cost model keeps one byte count for forward and backward; each phase the layer
    // has gets an equal share (exact to a few percent for GEMM layers, whose three phases
    // each move about W + X + Y).
    const bool has_dw = l.bwd_weight_flops > 0;
    const bool has_dx = l.bwd_input_flops > 0 || !has_dw;
    const int n = 1 + has_dx + has_dw;
    const double bytes = (l.bytes_read + l.bytes_written) * width / n;
    const bool gemm = l.gemm_count > 0 && l.fwd_matmul_flops > 0;
    // The three GEMMs of a layer are permutations of one shape: one intensity, one fraction.
    const double eq_n = equivalent_square_n(l.gemm_m, l.gemm_n, l.gemm_k);
    const bool conv = l.op == "conv2d" || l.op == "gconv2d";
    const double fraction = !gemm  ? 1
                            : conv ? p.conv_fraction(f.peak_dtype, eq_n)
                                   : p.gemm_fraction(f.peak_dtype, eq_n);
    auto mapped = [&](int64_t m, int64_t nn, int64_t k) -> std::optional<SystolicMapping> {
      if (!gemm || !p.systolic_array) return std::nullopt;
      return map_gemm(m, nn, k, l.gemm_count, *p.systolic_array);
    };
    PhaseTime fwd{"forward", l.fwd_flops, l.fwd_matmul_flops, bytes};
    fwd.mapping = mapped(l.gemm_m, l.gemm_n, l.gemm_k);
    if (fwd.matmul_flops > 0) fwd.gemm_fraction = fraction;
    finish(fwd);
    lt.phases.push_back(fwd);
    if (has_dx) {
      // dX (M x K) = dY (M x N) W^T (N x K)
      PhaseTime dx{"backward-input", l.bwd_input_flops,
                   gemm && l.bwd_input_flops > 0 ? l.fwd_matmul_flops : 0, bytes};
      if (dx.matmul_flops > 0) {
        dx.mapping = mapped(l.gemm_m, l.gemm_k, l.gemm_n);
        dx.gemm_fraction = fraction;
      }
      finish(dx);
      lt.phases.push_back(dx);
    }
    if (has_dw) {
      // dW (K x N) = X^T (K x M) dY (M x N)
      PhaseTime dw{"backward-weight", l.bwd_weight_flops, gemm ? l.fwd_matmul_flops : 0, bytes};
      if (dw.matmul_flops > 0) {
        dw.mapping = mapped(l.gemm_k, l.gemm_n, l.gemm_m);
        dw.gemm_fraction = fraction;
      }
      finish(dw);
      lt.phases.push_back(dw);
    }
    // A measured elementwise rate slower than the roofline: the layer's phases share it.
    if (p.efficiency && l.elements > 0 && !gemm) {
      const auto it = p.efficiency->op_ns_per_element.find(l.op);
      if (it != p.efficiency->op_ns_per_element.end()) {
        const double total = l.elements * it->second * 1e-9 * double(f.bits) / 32;
        for (auto& ph : lt.phases)
          ph.memory_s = std::max(ph.memory_s, total / double(lt.phases.size()));
      }
    }
    s.layers.push_back(std::move(lt));
  }
  PhaseTime opt{"optimizer", cost.opt_flops, 0, cost.opt_bytes * width};
  finish(opt);
  s.layers.push_back({"optimizer", "optimizer", {opt}});
  for (const auto& l : s.layers)
    for (const auto& ph : l.phases) {
      const double t = ph.time_s();
      s.step_s += t;
      s.phase_s[ph.phase] += t;
      (ph.memory_bound() ? s.memory_bound_s : s.compute_bound_s) += t;
    }
  // Added, not overlapped: on a CPU the thread that dispatches an operator then waits for it.
  if (p.efficiency) {
    s.ops = count_operators(cost);
    s.op_overhead_s = p.efficiency->op_overhead_us * 1e-6;
    s.overhead_s = s.ops.total() * s.op_overhead_s;
    s.step_s += s.overhead_s;
  }
  // Inputs stay as loaded; everything else is held at the format's width.
  s.memory_bytes = (cost.memory.total() - cost.memory.inputs) * width + cost.memory.inputs;
  s.capacity_bytes = p.memory_gb * 1e9;
  if (cost.data_parallel.workers > 1) {
    s.workers = cost.data_parallel.workers;
    s.zero = cost.data_parallel.zero;
    s.comm_bytes_ideal = cost.data_parallel.ideal_bytes_per_step * width;
    s.comm_bytes_run = cost.data_parallel.run_bytes_per_step * width;
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
        {"note", s.format.note}}},
      {"status", s.status},
      {"peak_flops", s.peak_flops},
      {"bandwidth", s.bandwidth},
      {"step_s", s.step_s},
      {"compute_bound_s", s.compute_bound_s},
      {"memory_bound_s", s.memory_bound_s},
      {"overhead_s", s.overhead_s},
      {"op_overhead_s", s.op_overhead_s},
      {"operators",
       {{"forward", s.ops.forward},
        {"backward", s.ops.backward},
        {"optimizer", s.ops.optimizer},
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

std::string format_simulation(const Simulation& s, size_t top_layers) {
  std::ostringstream o;
  o << fmt::format("{} on {} in {} ({} bits, {} peak {:.4g} TFLOP/s, {:.4g} GB/s)\n", s.config,
                   s.platform, s.format.name, s.format.bits, s.format.peak_dtype,
                   s.peak_flops / 1e12, s.bandwidth / 1e9);
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
  o << fmt::format("bound: compute {:.1f}%, memory {:.1f}%, overhead {:.1f}%\n",
                   100 * s.compute_bound_s / t, 100 * s.memory_bound_s / t, 100 * s.overhead_s / t);
  if (s.op_overhead_s > 0)
    o << fmt::format(
        "overhead: {:.0f} operators (forward {:.0f}, backward {:.0f}, optimizer {:.0f}) x {:.3g} "
        "us = {:.4g} ms\n",
        s.ops.total(), s.ops.forward, s.ops.backward, s.ops.optimizer, s.op_overhead_s * 1e6,
        s.overhead_s * 1e3);
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
    o << fmt::format("{:<32} {:<12} {:>10.4g} {:>6.1f}%  {}\n", l->name, l->op, l->time_s() * 1e3,
                     100 * l->time_s() / t, detail);
  }
  return o.str();
}

}  // namespace tb::sim
