#include "report/profile_table.h"

#include <fmt/format.h>

#include <cmath>

#include "report/run_table.h"
#include "spec/printable.h"

namespace tb {
namespace {

std::string percent(double f) { return fmt::format("{:.1f}%", 100 * f); }

std::string shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string op_line(const Profile& p, const OpStats& o) {
  const auto u = p.op_utilization(o);
  return fmt::format("  {:<34} {:<9} {:>6.0f} {:>10} {:>10} {:>6} {:>11} {:>11} {:>7} {:>6}  {}\n",
                     shorten(o.name, 34), o.phase, o.calls, seconds(o.total_us * 1e-6),
                     seconds(o.self_us * 1e-6), percent(p.step_us > 0 ? o.self_us / p.step_us : 0),
                     o.flops > 0 ? si(o.flops, "FLOP") : "-",
                     o.flops > 0 ? si(o.achieved_flops(), "FLOP/s") : "-",
                     o.flops > 0 && o.bytes > 0 ? fmt::format("{:.1f}", o.intensity()) : "-",
                     u ? percent(*u) : "-", shorten(o.shapes, 40));
}

std::string op_header() {
  return fmt::format("  {:<34} {:<9} {:>6} {:>10} {:>10} {:>6} {:>11} {:>11} {:>7} {:>6}  {}\n",
                     "operator", "phase", "calls", "total", "self", "share", "FLOPs", "achieved",
                     "FLOP/B", "util", "input shapes");
}

}  // namespace

std::string format_utilization(const Utilization& u) {
  std::string out =
      fmt::format("utilization  compute (TBD eq. 1) {}: operators ran {} of {}\n",
                  u.compute ? percent(*u.compute) : "-", seconds(u.active_s), seconds(u.elapsed_s));
  if (u.fp)
    out += fmt::format(
        "             {} (TBD eq. 2) {} of the {} peak while active, {} over "
        "the whole window\n",
        u.dtype, percent(*u.fp), si(*u.peak_flops, "FLOP/s"), percent(*u.fp_elapsed));
  else
    out +=
        "             eq. 2 needs a platform peak: run `trainbench platform` or pass "
        "--peak-gflops\n";
  std::string cores;
  for (double c : u.cpu.per_core)
    cores += (cores.empty() ? "" : " ") + fmt::format("{:.0f}", 100 * c);
  out += fmt::format("             CPU (TBD eq. 3) process {}, machine {} (per core %: {})\n",
                     percent(u.cpu.process), percent(u.cpu.system), cores);
  const auto& t = u.threads;
  const std::string window =
      t.elapsed_s > 0 ? fmt::format(" over {}{}", seconds(t.elapsed_s),
                                    t.steps > 0 ? fmt::format(" ({} steps)", t.steps) : "")
                      : "";
  if (t.threads_used == 0)
    out += fmt::format(
        "threads      not measured: no thread ran for 1% of the {} window; the "
        "kernel's accounting is coarser than that\n",
        seconds(t.elapsed_s));
  else
    out += fmt::format(
        "threads      {} used of {}{}: computing {}, waiting for a core {}, blocked or "
        "idle {}{}\n",
        t.threads_used, t.threads, window, seconds(t.computing_s), seconds(t.runnable_wait_s),
        seconds(t.blocked_s), t.has_schedstat ? "" : " (no schedstat: waits unknown)");
  return out;
}

std::string format_profile(const Profile& p, size_t top) {
  std::string out = fmt::format("config       {}\n", printable(p.config));
  out += fmt::format(
      "window       {} steps after {} warm-up; step {} profiled, {} without the "
      "profiler\n",
      p.steps, p.warmup_steps, seconds(p.step_us * 1e-6), seconds(p.unprofiled_step_us * 1e-6));
  auto phase = [&](const char* k) {
    auto it = p.phase_us.find(k);
    return it == p.phase_us.end() ? 0.0 : it->second;
  };
  out += fmt::format("phases       forward {}, backward {}, optimizer {}, other {}\n",
                     seconds(phase("forward") * 1e-6), seconds(phase("backward") * 1e-6),
                     seconds(phase("optimizer") * 1e-6), seconds(phase("other") * 1e-6));
  const auto pf = p.phase_flops();
  auto get = [](const std::map<std::string, double>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  out += fmt::format(
      "FLOPs        {} per step from the operators, cost model {} ({:+.1f}%); forward {} vs {}, "
      "backward {} vs {}, optimizer {} vs {}\n",
      si(p.flops, "FLOP"), si(p.model_flops, "FLOP"),
      p.model_flops > 0 ? 100 * (p.flops / p.model_flops - 1) : 0.0, si(get(pf, "forward"), ""),
      si(get(p.model_phase_flops, "forward"), ""), si(get(pf, "backward"), ""),
      si(get(p.model_phase_flops, "backward"), ""), si(get(pf, "optimizer"), ""),
      si(get(p.model_phase_flops, "optimizer"), ""));
  out += fmt::format("achieved     {} over the profiled step, {} moved by the operators\n",
                     si(p.achieved_flops(), "FLOP/s"), bytes_iec(p.bytes));
  out += format_utilization(p.utilization);
  if (const auto above = p.above_peak(); !above.empty())
    out += fmt::format(
        "ABOVE PEAK   {} operator(s) ran faster than the peak, the fastest {} ({}) at {}: the "
        "peak was measured with other threads or is stale, or the operator's FLOPs are "
        "over-attributed\n",
        above.size(), above[0]->name, above[0]->shapes, percent(*p.op_utilization(*above[0])));

  out += fmt::format("\nTop {} operators by self time (per step; share = self time / step time)\n",
                     top);
  out += op_header();
  for (const auto* o : p.top_by_self_time(top)) out += op_line(p, *o);

  const auto below = p.below_average(5);
  out += fmt::format(
      "\nLongest operators below the step's average {} (TBD Tables V/VI): the "
      "first candidates for optimization\n",
      si(p.achieved_flops(), "FLOP/s"));
  if (below.empty())
    out += "  (none)\n";
  else
    out += op_header();
  for (const auto* o : below) out += op_line(p, *o);

  out += "\nSelf time by operator class, per step\n";
  std::vector<std::pair<double, std::string>> classes;
  double classified = 0;
  for (const auto& [c, us] : p.class_self_us()) classes.push_back({us, c}), classified += us;
  std::sort(classes.rbegin(), classes.rend());
  for (const auto& [us, c] : classes)
    out += fmt::format("  {:<14} {:>10} {:>6}\n", c, seconds(us * 1e-6),
                       percent(p.step_us > 0 ? us / p.step_us : 0));
  out +=
      fmt::format("  {:<14} {:>10} {:>6}\n", "(between ops)",
                  seconds(std::max(0.0, p.step_us - classified) * 1e-6),
                  percent(p.step_us > 0 ? std::max(0.0, p.step_us - classified) / p.step_us : 0));

  if (const auto parts = p.part_self_us(); !parts.empty()) {
    // Matrix-product FLOPs against the cost's model FLOPs: MoE experts run capacity-padded
    // and recomputed forwards run twice, so those parts count more than the model's.
    const auto flops = p.part_matmul_flops();
    out += "\nSelf time by model part, forward and backward, per step (matmul FLOPs vs model)\n";
    double parted = 0;
    for (const auto& [part, us] : parts) {
      parted += us;
      const double f = get(flops, part.c_str()), mf = get(p.model_part_flops, part.c_str());
      out += fmt::format("  {:<18} {:>10} {:>6}  {} vs {}{}\n", part, seconds(us * 1e-6),
                         percent(p.step_us > 0 ? us / p.step_us : 0), si(f, "FLOP"), si(mf, "FLOP"),
                         mf > 0 ? fmt::format(" ({:+.1f}%)", 100 * (f / mf - 1)) : "");
    }
    out += fmt::format("  {:<18} {:>10} {:>6}\n", "(rest of the step)",
                       seconds(std::max(0.0, p.step_us - parted) * 1e-6),
                       percent(p.step_us > 0 ? std::max(0.0, p.step_us - parted) / p.step_us : 0));
  }
  return out;
}

std::string format_memory(const MemoryBreakdown& m) {
  std::string out = fmt::format("config       {}\n", printable(m.config));
  out += fmt::format("peak         {} during {} ({} allocations in the step; cost model {})\n",
                     bytes_iec(m.peak_total), m.peak_phase, m.allocations,
                     bytes_iec(m.estimate.total()));
  out += fmt::format("  {:<16} {:>11} {:>11} {:>11} {:>11}\n", "category", "peak", "at peak",
                     "estimate", "difference");
  for (int c = 0; c < kMemoryCategories; ++c) {
    const double e = m.estimate_of(c);
    out += fmt::format(
        "  {:<16} {:>11} {:>11} {:>11} {:>11}\n", category_name(c), bytes_iec(m.peak[c]),
        bytes_iec(m.at_peak[c]), e >= 0 ? bytes_iec(e) : "",
        e >= 0 ? (m.peak[c] >= e ? "+" : "-") + bytes_iec(std::fabs(m.peak[c] - e)) : "");
  }
  const double transient = m.peak[kWorkspace] + m.peak[kTemporaries];
  out += fmt::format("  {:<16} {:>11} {:>11} {:>11} {:>11}\n", "workspace+temp",
                     bytes_iec(transient), "", bytes_iec(m.estimate.workspace),
                     (transient >= m.estimate.workspace ? "+" : "-") +
                         bytes_iec(std::fabs(transient - m.estimate.workspace)));
  out += fmt::format("exactness    weights {} = {} params x {} B; optimizer holds {}\n",
                     bytes_iec(m.peak[kWeights]), m.params, m.dtype_bytes,
                     bytes_iec(m.optimizer_held_bytes));
  for (const auto& r : m.estimate.references)
    out += fmt::format("compare      {:>11}  {}\n", bytes_iec(r.bytes), r.label);
  return out;
}

std::string format_memory_sweep(const MemorySweep& s) {
  static const char marks[kMemoryCategories] = {'W', 'G', 'O', 'F', 'w', 't', 'I', '.'};
  std::string out = "Memory at the step's peak, by category (TBD Fig. 8)\n";
  out += fmt::format("  {:>7} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "batch",
                     "weights", "gradients", "optimizer", "feat.maps", "work+temp", "inputs",
                     "peak", "cost model");
  double widest = 0;
  for (const auto& b : s.batches) widest = std::max(widest, b.peak_total);
  for (const auto& b : s.batches)
    out += fmt::format("  {:>7} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", b.batch,
                       bytes_iec(b.at_peak[kWeights]), bytes_iec(b.at_peak[kGradients]),
                       bytes_iec(b.at_peak[kOptimizerState]), bytes_iec(b.at_peak[kFeatureMaps]),
                       bytes_iec(b.at_peak[kWorkspace] + b.at_peak[kTemporaries]),
                       bytes_iec(b.at_peak[kInputs]), bytes_iec(b.peak_total),
                       bytes_iec(b.estimate.total()));
  out += "\n";
  const int width = 60;
  for (const auto& b : s.batches) {
    std::string bar;
    double cum = 0;
    int drawn = 0;
    for (int c = 0; c < kMemoryCategories; ++c) {
      cum += b.at_peak[c];
      const int upto = widest > 0 ? int(std::lround(width * cum / widest)) : 0;
      for (; drawn < upto; ++drawn) bar += marks[c];
    }
    out += fmt::format("  {:>7} |{:<60}| {}\n", b.batch, bar, bytes_iec(b.peak_total));
  }
  out +=
      "          W weights  G gradients  O optimizer state  F feature maps  w workspace  "
      "t temporaries  I inputs  . other\n\n";
  const auto& f = s.feature_maps_fit;
  out += fmt::format(
      "feature maps {} per example (fit over batch sizes, R^2 {:.4f}); cost model {} "
      "per example\n",
      bytes_iec(f.slope), f.r2,
      s.batches.empty() || s.batches[0].batch == 0
          ? "-"
          : bytes_iec(s.batches[0].estimate.feature_maps / double(s.batches[0].batch)));
  out +=
      fmt::format("peak         {} + {} per example (R^2 {:.4f})\n",
                  bytes_iec(s.total_fit.intercept), bytes_iec(s.total_fit.slope), s.total_fit.r2);
  if (s.budget) {
    out += fmt::format("budget       {}: largest measured batch that fits {}", bytes_iec(*s.budget),
                       s.largest_measured_fit ? std::to_string(*s.largest_measured_fit) : "none");
    if (s.largest_predicted_fit)
      out += fmt::format(", largest predicted by the fit {}", *s.largest_predicted_fit);
    out +=
        "\n             (tensors only: the process also needs its libraries and the BLAS's "
        "buffers)\n";
  }
  return out;
}

}  // namespace tb
