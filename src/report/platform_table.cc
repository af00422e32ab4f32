#include "report/platform_table.h"

#include <fmt/format.h>

#include "report/run_table.h"
#include "spec/printable.h"

namespace tb {

std::string format_platform(const PlatformDescription& p) {
  std::string out = fmt::format("platform  {} ({})\n", printable(p.name), printable(p.kind));
  if (!p.description.empty()) out += fmt::format("          {}\n", printable(p.description));
  out += fmt::format("memory    {:.4g} GB{}, {:.4g} GB/s", p.memory_gb,
                     p.cores > 0 ? fmt::format(" ({:.3g} GB per core)", p.memory_gb / p.cores) : "",
                     p.memory_bandwidth_gbps);
  for (const auto& [level, gbps] : p.cache_bandwidth_gbps)
    out += fmt::format(", {} {:.4g} GB/s", level, gbps);
  out += "\n";
  const auto spec = p.extra.value("spec_peak_tflops", nlohmann::json::object());
  for (const auto& [dtype, tflops] : p.peak_tflops) {
    out += fmt::format("peak      {:<5} {:>9.4g} TFLOP/s   ridge {:.4g} FLOP/byte", dtype, tflops,
                       *p.ridge(dtype));
    if (spec.contains(dtype)) {
      // Descriptions from before verification was recorded say nothing: not verified.
      const bool verified =
          p.extra.value("spec_peak_verified", nlohmann::json::object()).value(dtype, false);
      out += fmt::format("   theoretical {:.4g} TFLOP/s{} (measured {:.0f}%)",
                         spec[dtype].get<double>(), verified ? "" : ", unverified estimate",
                         100 * tflops / spec[dtype].get<double>());
    }
    out += "\n";
  }
  if (p.extra.contains("machine")) {
    const auto& m = p.extra["machine"];
    std::string caches;
    for (const auto& c : m["caches"])
      caches += fmt::format("{}L{} {} {}x{}", caches.empty() ? "" : ", ", c["level"].get<int>(),
                            c["type"].get<std::string>(), c["instances"].get<int>(),
                            bytes_iec(c["size_bytes"].get<double>()));
    std::string simd;
    for (const auto& f : m["simd"]) simd += (simd.empty() ? "" : " ") + f.get<std::string>();
    out += fmt::format(
        "machine   {}, {} socket(s), {} cores, {} threads, {:.0f} MHz; {} total, {} available\n"
        "caches    {}\nsimd      {}\nsoftware  LibTorch {}, BLAS {}; measured with {} threads\n",
        m["cpu_model"].get<std::string>(), m["sockets"].get<int>(), m["physical_cores"].get<int>(),
        m["logical_cpus"].get<int>(), m["mhz"].get<double>(),
        bytes_iec(m["memory_total_bytes"].get<double>()),
        bytes_iec(m["memory_available_bytes"].get<double>()), caches, simd,
        m["libtorch"].get<std::string>(), m["blas"].get<std::string>(), m["threads"].get<int>());
  }
  if (p.systolic_array)
    out += fmt::format("array     {} x {} systolic, {}\n", p.systolic_array->rows,
                       p.systolic_array->cols, p.systolic_array->dataflow);
  if (p.efficiency) {
    std::string cells;
    for (const auto& [cell, us] : p.efficiency->cell_step_us)
      cells +=
          fmt::format("{} {} {:.3g}", cells.empty() ? "; per recurrent time step:" : ",", cell, us);
    std::string gates;
    for (const auto& [cell, ns] : p.efficiency->cell_ns_per_element)
      gates += fmt::format("{} {} {:.3g}", gates.empty() ? "; per gate element and step:" : ",",
                           cell, ns);
    out += fmt::format(
        "overhead  {:.3g} us per operator{}{}{}\n", p.efficiency->op_overhead_us,
        p.efficiency->conv_call_us > 0
            ? fmt::format(", {:.3g} us more per convolution phase", p.efficiency->conv_call_us)
            : "",
        cells.empty() ? "" : cells + " us", gates.empty() ? "" : gates + " ns");
    // The whole layer per time step, at the grid's corners: the spread a model's sizes span.
    for (const auto& [cell, pts] : p.efficiency->cell_step_table)
      out += fmt::format(
          "rnn layer {:<5} {:.4g} us per time step at hidden {} batch {} .. {:.4g} us at hidden {} "
          "batch {} ({} points, fp32, forward + backward)\n",
          cell, pts.front().us, pts.front().hidden, pts.front().batch, pts.back().us,
          pts.back().hidden, pts.back().batch, pts.size());
    for (const auto& [dtype, opts] : p.efficiency->optimizer_ns_per_param) {
      out += fmt::format("optimizer {:<5}", dtype);
      for (const auto& [opt, ns] : opts) out += fmt::format(" {} {:.3g}", opt, ns);
      out += " ns per parameter per step\n";
    }
    for (const auto& [dtype, c] : p.efficiency->gemm) {
      out += fmt::format("gemm eff  {:<5}", dtype);
      for (const auto& pt : c)
        out += fmt::format(" n={}: {:.0f}%", pt.n, 100 * pt.fraction_of_peak);
      out += " of peak (the per-call floor excluded)\n";
    }
    for (const auto& [label, tables, what] :
         {std::tuple{"gemm rows", &p.efficiency->gemm_rows,
                     "a linear layer's 3 GEMMs, batch rows x n by n x n"},
          std::tuple{"conv rows", &p.efficiency->conv_rows,
                     "3x3 convolutions, output rows x n channels, the run's threads"}})
      for (const auto& [dtype, pts] : *tables) {
        out += fmt::format("{} {:<5}", label, dtype);
        for (const auto& pt : pts)
          out += fmt::format(" {}x{}: {:.0f}%", pt.rows, pt.n, 100 * pt.fraction_of_peak);
        out += fmt::format(" of peak ({})\n", what);
      }
  }
  const auto formulas = p.extra.value("spec_peak_formula", nlohmann::json::object());
  const auto caveats = p.extra.value("spec_peak_caveat", nlohmann::json::object());
  for (const auto& [dtype, f] : formulas.items()) {
    out += fmt::format("spec      {}: {}\n", dtype, f.get<std::string>());
    if (caveats.contains(dtype))
      out += fmt::format("          unverified: {}\n", caveats[dtype].get<std::string>());
  }
  if (p.extra.contains("measurements")) {
    const auto& m = p.extra["measurements"];
    const auto gemm = m.value("gemm", nlohmann::json::object());
    for (const auto& [dtype, g] : gemm.items()) {
      out += fmt::format("gemm      {:<5}", dtype);
      for (const auto& s : g["sizes"])
        out += fmt::format(" n={}: {:.0f} (median {:.0f})", s["n"].get<int64_t>(),
                           s["best"].get<double>(), s["median"].get<double>());
      out += " GFLOP/s\n";
    }
    if (m.contains("stream")) {
      const auto& s = m["stream"];
      out += fmt::format(
          "stream    copy {:.1f}, scale {:.1f}, add {:.1f}, triad {:.1f} GB/s (best of {}; "
          "triad median {:.1f}); arrays {}{}; {}\n",
          s["copy"]["best"].get<double>(), s["scale"]["best"].get<double>(),
          s["add"]["best"].get<double>(), s["triad"]["best"].get<double>(),
          s["triad"]["trials"].size(), s["triad"]["median"].get<double>(),
          bytes_iec(s["array_bytes"].get<double>()),
          s["arrays_at_least_4x_llc"].get<bool>() ? "" : " (capped by memory: < 4x LLC)",
          s["validation"].get<std::string>());
    }
    if (m.contains("steadiness")) {
      const auto& st = m["steadiness"];
      out += "steady   ";
      for (const auto& pt : st["points"]) out += fmt::format(" {:.0f}", pt["gflops"].get<double>());
      out += fmt::format(" GFLOP/s (one GEMM from start to end, max/min {:.2f})\n",
                         st["max_over_min"].get<double>());
      if (st.contains("warning"))
        out += fmt::format("WARNING   {}\n", st["warning"].get<std::string>());
    }
    if (m.contains("working_set")) {
      out += "sweep    ";
      for (const auto& pt : m["working_set"]["points"])
        out += fmt::format(" {}:{:.0f}", bytes_iec(pt["bytes"].get<double>()),
                           pt["best"].get<double>());
      out += " GB/s\n";
    }
  }
  out += fmt::format("source    {}\n", p.source);
  return out;
}

std::string format_platform_list(const std::vector<PlatformDescription>& ps) {
  std::string out = fmt::format("{:<30} {:<12} {:>9} {:>11} {:>8}  {}\n", "name", "kind",
                                "memory GB", "bandwidth", "ridge", "peak TFLOP/s");
  for (const auto& p : ps) {
    std::string peaks, ridge;
    double best = 0;
    // int8's peak counts integer operations (TOPS), not FLOPs: said so, and not the ridge's.
    for (const auto& [d, t] : p.peak_tflops) {
      const bool integer = d.rfind("int", 0) == 0;
      peaks +=
          fmt::format("{}{} {:.4g}{}", peaks.empty() ? "" : ", ", d, t, integer ? " TOPS" : "");
      if (!integer && t > best) best = t, ridge = fmt::format("{:.4g}", *p.ridge(d));
    }
    out += fmt::format("{:<30} {:<12} {:>9.4g} {:>7.4g} GB/s {:>8}  {}\n", p.name, p.kind,
                       p.memory_gb, p.memory_bandwidth_gbps, ridge, peaks);
  }
  out +=
      "ridge: FLOPs per byte at the highest floating-point peak. Details: trainbench platform "
      "--spec NAME\n";
  return out;
}

std::string format_roofline(const PlatformDescription& p, const std::vector<double>& intensities) {
  std::string out = fmt::format("{:>12}", "FLOP/byte");
  for (const auto& [d, t] : p.peak_tflops) out += fmt::format(" {:>16}", d);
  out += "\n";
  for (double x : intensities) {
    out += fmt::format("{:>12.4g}", x);
    for (const auto& [d, t] : p.peak_tflops) {
      const double a = *p.attainable(d, x);
      out += fmt::format(" {:>16}", si(a, "FLOP/s") + (a < *p.peak_flops(d) ? " m" : " c"));
    }
    out += "\n";
  }
  out += "m: memory-bound (below the ridge), c: compute-bound\n";
  return out;
}

}  // namespace tb
