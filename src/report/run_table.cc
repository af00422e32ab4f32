#include "report/run_table.h"

#include <fmt/format.h>

#include <cmath>

#include "record/json.h"
#include "spec/printable.h"

namespace tb {

std::string si(double v, const std::string& unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 6) v /= 1000, ++i;
  // No unit and no prefix: the number alone ("340 params", not "340  params").
  const std::string suffix = std::string(prefixes[i]) + unit;
  return suffix.empty() ? fmt::format("{:.3g}", v) : fmt::format("{:.3g} {}", v, suffix);
}

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

namespace {
// " (46.2% of its 1 thread's share, 1 of 2 cores)" after a CPU run's utilization, when it ran
// on fewer threads than the cores its peak counts; "" otherwise. The stored utilization stays
// against the whole peak, as ParaDnn's and TBD's are; the simulator's validation takes the
// share (simulate/accelerator_model.h: peak_share).
std::string thread_share(double utilization, int threads, const nlohmann::json& cores,
                         const std::string& device) {
  if (!cores.is_number_integer() || threads <= 0 || device.rfind("cpu", 0) != 0) return "";
  const int n = cores.get<int>();
  if (threads >= n) return "";
  return fmt::format(" ({:.1f}% of its {} {} share, {} of {} cores)",
                     100 * utilization * double(n) / double(threads), threads,
                     threads == 1 ? "thread's" : "threads'", threads, n);
}

// "phases    forward 1.2 ms (31%), backward ..." from a result's timing.phases_s; "" without.
std::string phases_line(const nlohmann::json& phases, double step) {
  if (!phases.is_object() || step <= 0) return "";
  std::string out;
  for (const char* k : {"forward", "backward", "optimizer", "other"}) {
    const double v = number_or(phases, k, NAN);
    if (!std::isfinite(v)) continue;
    out += fmt::format("{}{} {} ({:.0f}%)", out.empty() ? "" : ", ", k, seconds(v), 100 * v / step);
  }
  return out.empty() ? "" : "phases    " + out + " (wall clock at the phases' edges)\n";
}
}  // namespace

std::string format_context(const Context& c) {
  const std::string round_trip =
      c.core_round_trip ? fmt::format("; CPU {} to {} and back {:.0f} ns", c.core_round_trip->cpu_a,
                                      c.core_round_trip->cpu_b, c.core_round_trip->ns)
                        : "";
  return fmt::format(
      "host      {} ({}, {} CPUs, {} memory, {} available)\n"
      "software  trainbench {} (git {}), LibTorch {}, BLAS {} [{}], oneDNN {}\n"
      "threads   {} intra-op, BLAS threads: {}; CPUs allowed {}{}\n",
      c.host.hostname, c.host.cpu_model, c.host.logical_cpus, bytes_iec(double(c.host.mem_total)),
      bytes_iec(double(c.host.mem_available)), c.trainbench_version, c.git_revision,
      c.libtorch_version, c.blas.label(), c.blas.library, c.onednn ? "on" : "off", c.openmp_threads,
      c.blas_pool, c.affinity, round_trip);
}

std::string placement_moved(const std::vector<RunResult>& results, const Context& c) {
  if (!c.core_round_trip) return "";
  const double after = c.core_round_trip->ns;
  std::string out;
  for (const auto& r : results) {
    if (!r.core_round_trip_ns || !(after > 0) || !(*r.core_round_trip_ns > 0)) continue;
    const double before = *r.core_round_trip_ns;
    if (std::max(before, after) < 2 * std::min(before, after)) continue;
    out += fmt::format(
        "placement {}: CPU round trip {:.0f} ns before its timed loop, {:.0f} ns after the runs: "
        "the host moved the threads, so its step times may mix two placements (docs/stacks.md; "
        "--repetitions N measures the spread)\n",
        r.config, before, after);
  }
  return out;
}

std::string format_result(const RunResult& r) {
  std::string out =
      fmt::format("config    {}\nstatus    {}\n", printable(r.config), to_string(r.status));
  if (r.status != Status::kOk) out += fmt::format("reason    {}\n", printable(r.error));
  if (!r.stack.empty()) {
    const auto& d = r.stack_detected;
    out += fmt::format("stack     {} (ran: BLAS {}, {} BLAS threads, oneDNN {}, {})\n", r.stack,
                       d.value("blas", "?"), d.value("blas_threads", 0), d.value("onednn", "?"),
                       d.value("mode", "?"));
    if (!r.stack_mismatch.empty())
      out += fmt::format("WARNING   stack differs from the request: {}\n", r.stack_mismatch);
  }
  const auto& c = r.cost;
  // A model that was never built (a missing TorchScript file) has no cost to show: zeros would
  // read as a measurement.
  if (r.status != Status::kOk && c.params == 0 && c.flops() == 0) return out;
  out += fmt::format(
      "cost      {} params, {} per step (fwd {}, bwd {}, opt {}), {} moved, "
      "intensity {:.1f} FLOP/B{}\n",
      si(double(c.params), ""), si(c.flops(), "FLOP"), si(c.fwd_flops, ""), si(c.bwd_flops, ""),
      si(c.opt_flops, ""), bytes_iec(c.bytes), c.intensity(),
      c.source == "analytic" ? "" : " (counted by the " + c.source + ")");
  out += fmt::format(
      "memory    estimated {} (weights {}, gradients {}, optimizer {}, feature maps "
      "{}, inputs {}, workspace {})\n",
      bytes_iec(c.memory.total()), bytes_iec(c.memory.weights), bytes_iec(c.memory.gradients),
      bytes_iec(c.memory.optimizer_state), bytes_iec(c.memory.feature_maps),
      bytes_iec(c.memory.inputs), bytes_iec(c.memory.workspace));
  if (r.status != Status::kOk) return out;
  const auto& s = r.steps;
  // One sample has no spread: say so rather than print an infinite interval.
  const std::string ci = std::isfinite(s.ci.relative())
                             ? fmt::format("+-{:.2f}% (95% CI)", 100 * s.ci.relative())
                             : std::string("(one sample: no CI)");
  out += fmt::format(
      "step      mean {} {}, median {}, p5 {}, p95 {}, CV {:.2f}%\n"
      "sampling  {} samples after {} warm-up steps ({}, {}), {} of timed loop\n",
      seconds(s.mean), ci, seconds(s.median), seconds(s.p5), seconds(s.p95), 100 * s.cv, s.samples,
      s.warmup, s.end_reason, s.stationary ? "stationary" : "NOT stationary", seconds(s.wall_s));
  if (!r.phase_s.empty()) out += phases_line(nlohmann::json(r.phase_s), s.mean);
  out += fmt::format("speed     {:.1f} examples/s, {}", r.examples_per_s,
                     si(r.achieved_flops, "FLOP/s"));
  if (r.throughput_unit != "examples")
    out += fmt::format(" ({:.1f} {}/s)", r.units_per_s, r.throughput_unit);
  if (r.flops_utilization)
    out += fmt::format(
        ", {:.1f}% of the {} peak{}", 100 * *r.flops_utilization, si(*r.peak_flops, "FLOP/s"),
        thread_share(*r.flops_utilization, r.threads,
                     r.peak_cores ? nlohmann::json(*r.peak_cores) : nlohmann::json(), r.device));
  // Families with a model-FLOPs convention (gpt): MFU beside the hardware utilization above.
  if (r.cost.model_flops.total > 0 && r.peak_flops && *r.peak_flops > 0 && s.mean > 0)
    out += fmt::format(
        "\nmfu       {:.1f}% model FLOPS utilization ({} model FLOPs per step; the "
        "utilization above counts what runs: HFU)",
        100 * r.cost.model_flops.total / s.mean / *r.peak_flops,
        si(r.cost.model_flops.total, "FLOP"));
  if (r.roofline)
    out += fmt::format(
        "\nroofline  {}-bound on {} (intensity {:.3g} {} ridge {:.3g} FLOP/B); "
        "{:.0f}% of the attainable {}",
        r.roofline->memory_bound ? "memory" : "compute", r.roofline->platform,
        r.roofline->intensity, r.roofline->memory_bound ? "<" : ">=", r.roofline->ridge,
        100 * r.roofline->fraction_of_roof(), si(r.roofline->attainable, "FLOP/s"));
  out += fmt::format(
      "\ncpu       {:.0f}% utilization by this process (TBD eq. 3), {:.0f}% system; "
      "{} threads, BLAS threads {}\n",
      100 * r.cpu.process, 100 * r.cpu.system, r.threads, r.blas_threads);
  out += "spread    between processes not measured (one process; --repetitions N measures it)\n";
  return out;
}

std::string format_repeated(const nlohmann::json& r) {
  std::string out = fmt::format("config    {}\nstatus    {}\n", printable(r.value("config", "")),
                                r.value("status", ""));
  const nlohmann::json reps = r.value("repetitions", nlohmann::json::object());
  const nlohmann::json runs = reps.value("runs", nlohmann::json::array());
  std::string each;
  for (const auto& e : runs) {
    const auto& t = e["timing"];
    each +=
        fmt::format("{}{} +-{:.1f}%", each.empty() ? "" : ", ",
                    seconds(number_or(t, "mean_s", 0.0)), 100 * number_or(t, "ci95_relative", NAN));
  }
  if (r.value("status", "") != "ok") {
    out += fmt::format("reason    {}\n", printable(r.value("error", "")));
    if (!runs.empty()) out += fmt::format("processes {} ok before it: {}\n", runs.size(), each);
    return out;
  }
  const nlohmann::json b = reps.contains("between_processes") ? reps["between_processes"] : nullptr;
  if (b.is_object())
    out += fmt::format(
        "step      {} ({}); between processes min {}, max {} "
        "(max/min {:.3f}), CV {:.2f}%, +-{:.2f}% (95% CI over processes)\n",
        seconds(number_or(r["timing"], "mean_s", 0.0)),
        runs.size() == 2 ? std::string("the faster of 2 processes")
                         : fmt::format("the median process of {}{}", runs.size(),
                                       runs.size() % 2 ? "" : ", the faster of the middle two"),
        seconds(number_or(b, "min_s", 0.0)), seconds(number_or(b, "max_s", 0.0)),
        number_or(b, "max_over_min", 0.0), 100 * number_or(b, "cv", 0.0),
        100 * number_or(b, "ci95_relative", 0.0));
  else
    out += fmt::format("step      {} (one process: spread between processes not measured)\n",
                       seconds(number_or(r["timing"], "mean_s", 0.0)));
  out += fmt::format("processes {} (each mean with its own 95% CI, in the order run)\n", each);
  // Each process's CPU round trip (two threads or more): where the host placed its threads.
  std::string trips;
  double trip_min = INFINITY, trip_max = 0;
  for (const auto& e : runs)
    if (e.contains("core_round_trip_ns") && e["core_round_trip_ns"].is_number()) {
      const double ns = e["core_round_trip_ns"].get<double>();
      trips += fmt::format("{}{:.0f}", trips.empty() ? "" : ", ", ns);
      trip_min = std::min(trip_min, ns);
      trip_max = std::max(trip_max, ns);
    }
  if (!trips.empty())
    out += fmt::format("placement one cache line between two of its CPUs and back: {} ns\n", trips);
  // Twice as long in one process as in another: two placements (docs/stacks.md).
  const bool placements = !trips.empty() && trip_max >= 2 * trip_min;
  // The median process's (its timing block is the headline's).
  if (r.contains("timing") && r["timing"].contains("phases_s"))
    out += phases_line(r["timing"]["phases_s"], number_or(r["timing"], "mean_s", 0.0));
  const auto& m = r["metrics"];
  out += fmt::format("speed     {:.1f} examples/s, {}", number_or(m, "examples_per_s", 0.0),
                     si(number_or(m, "achieved_flops", 0.0), "FLOP/s"));
  if (m.contains("flops_utilization") && m["flops_utilization"].is_number())
    out += fmt::format(
        ", {:.1f}% of the peak{}", 100 * m["flops_utilization"].get<double>(),
        thread_share(m["flops_utilization"].get<double>(), r.value("threads", 0),
                     m.value("peak_cores", nlohmann::json()), r.value("device", std::string())));
  out += "\n";
  if (r.value("unstable", false))
    out += std::string(
               "UNSTABLE  the processes' means disagree beyond their own CIs: the step time "
               "depends on the process (two modes?)") +
           (placements ? fmt::format("; their CPU round trips range {:.0f}-{:.0f} ns: the host "
                                     "placed their threads differently",
                                     trip_min, trip_max)
                       : "") +
           "; see docs/stacks.md\n";
  return out;
}

std::string format_cost_table(const StepCost& c) {
  std::string out =
      fmt::format("{:<28} {:<12} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "layer", "op",
                  "params", "fwd FLOP", "bwd-in FLOP", "bwd-w FLOP", "bytes", "saved");
  for (const auto& l : c.layers)
    out += fmt::format("{:<28} {:<12} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}\n", l.name, l.op,
                       l.params, si(l.fwd_flops, ""), si(l.bwd_input_flops, ""),
                       si(l.bwd_weight_flops, ""), bytes_iec(l.bytes_read + l.bytes_written),
                       bytes_iec(l.saved_bytes));
  out += fmt::format("{:<28} {:<12} {:>10} {:>11}\n", "optimizer", "", "", si(c.opt_flops, ""));
  out += fmt::format("total: {} params, {} per step, {} moved, intensity {:.2f} FLOP/B\n", c.params,
                     si(c.flops(), "FLOP"), bytes_iec(c.bytes), c.intensity());
  return out;
}

std::string format_distributed(const nlohmann::json& r) {
  std::string out = fmt::format(
      "config    {}\nstatus    {}{}\n", printable(r.value("config", "")), r.value("status", ""),
      r.value("error", "").empty() ? "" : "  (" + r.value("error", "") + ")");
  if (!r.contains("distributed")) return out;
  const auto& d = r["distributed"];
  out += fmt::format("workers   {} ({}, {} launch), {} examples per worker per step\n",
                     d.value("workers", 0), d.value("backend", ""), d.value("launch", ""),
                     d.value("per_worker_batch", 0));
  out += fmt::format("throughput {:.1f} examples/s in all, {:.1f} per worker\n",
                     d.value("examples_per_s", 0.0), d.value("per_worker_examples_per_s", 0.0));
  if (r.contains("timing"))
    out += fmt::format("step      mean {:.3f} ms over {} steps ({})\n",
                       1e3 * r["timing"].value("mean_s", 0.0), r["timing"].value("samples", 0),
                       r["timing"].value("end_reason", ""));
  out += fmt::format(
      "comm      {:.1f}% of the step waiting for all-reduce after backward, compute {:.1f}%; "
      "all-reduce in flight {:.3f} ms/step ({:.0f}% hidden behind backward)\n",
      100 * d.value("comm_share", 0.0), 100 * d.value("compute_share", 0.0),
      1e3 * d.value("allreduce_busy_s", 0.0), 100 * d.value("overlapped_share", 0.0));
  out += fmt::format("allreduce {} bytes per step per worker in {} bucket(s)\n",
                     d.value("allreduce_bytes_per_step", int64_t(0)), d.value("buckets", 0));
  for (const auto& w : d.value("per_worker", nlohmann::json::array()))
    out += fmt::format("  worker {:>3}  {:>10.1f} examples/s  step {:.3f} ms  waiting {:.3f} ms\n",
                       w.value("rank", 0), w.value("examples_per_s", 0.0),
                       1e3 * w.value("step_mean_s", 0.0), 1e3 * w.value("exposed_comm_s", 0.0));
  return out;
}

}  // namespace tb
