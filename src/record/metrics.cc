#include "record/metrics.h"

namespace tb {

using nlohmann::json;

namespace {

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Stored columns keep the order they were first added in, so stores made by earlier
// versions and new ones have the same layout.
std::vector<Metric> make_table() {
  using R = const RunResult&;
  return {
      {"examples_per_s",
       "REAL",
       {"metrics", "examples_per_s"},
       [](R r) { return json(r.examples_per_s); },
       "Throughput",
       "examples/s",
       true},
      // The family's own unit (images, tokens, audio_s, frames).
      {"unit", "TEXT", {"metrics", "unit"}, [](R r) { return json(r.throughput_unit); }},
      {"units_per_s", "REAL", {"metrics", "units_per_s"}, [](R r) { return json(r.units_per_s); }},
      {"achieved_flops",
       "REAL",
       {"metrics", "achieved_flops"},
       [](R r) { return json(r.achieved_flops); },
       "Achieved FLOP/s",
       "FLOP/s",
       true},
      {"flops_utilization",
       "REAL",
       {"metrics", "flops_utilization"},
       [](R r) { return optional_number(r.flops_utilization); },
       "FLOPS utilization",
       "fraction of peak",
       true},
      {"peak_flops",
       "REAL",
       {"metrics", "peak_flops"},
       [](R r) { return optional_number(r.peak_flops); }},
      // In the JSON only: the cores the peak counts, where the platform states them.
      {"",
       "",
       {"metrics", "peak_cores"},
       [](R r) { return r.peak_cores ? json(*r.peak_cores) : json(nullptr); }},
      // In the JSON only: a fact about where the run's threads ran, not a figure to analyse.
      {"",
       "",
       {"metrics", "core_round_trip_ns"},
       [](R r) { return optional_number(r.core_round_trip_ns); }},
      {"cpu_utilization",
       "REAL",
       {"metrics", "cpu_utilization_process"},
       [](R r) { return json(r.cpu.process); },
       "CPU utilization",
       "fraction of cores",
       true,
       false},
      {"step_mean_s",
       "REAL",
       {"timing", "mean_s"},
       [](R r) { return json(r.steps.mean); },
       "Step time (mean)",
       "s",
       false},
      {"step_median_s",
       "REAL",
       {"timing", "median_s"},
       [](R r) { return json(r.steps.median); },
       "Step time (median)",
       "s",
       false},
      {"step_p5_s", "REAL", {"timing", "p5_s"}, [](R r) { return json(r.steps.p5); }},
      {"step_p95_s", "REAL", {"timing", "p95_s"}, [](R r) { return json(r.steps.p95); }},
      {"step_cv",
       "REAL",
       {"timing", "cv"},
       [](R r) { return json(r.steps.cv); },
       "Step time CV",
       "fraction",
       false,
       false},
      {"ci95_relative",
       "REAL",
       {"timing", "ci95_relative"},
       [](R r) { return json(r.steps.ci.relative()); }},
      {"samples", "INTEGER", {"timing", "samples"}, [](R r) { return json(r.steps.samples); }},
      {"warmup_steps",
       "INTEGER",
       {"timing", "warmup_steps"},
       [](R r) { return json(r.steps.warmup); }},
      {"end_reason",
       "TEXT",
       {"timing", "end_reason"},
       [](R r) { return json(r.steps.end_reason); }},
      // The cost block is written whole by to_json(StepCost), for every status.
      {"params", "INTEGER", {"cost", "params"}, {}, "Parameters", "count", true, false},
      {"flops_per_step",
       "REAL",
       {"cost", "flops_per_step"},
       {},
       "FLOPs per step",
       "FLOP",
       true,
       false},
      {"bytes_per_step", "REAL", {"cost", "bytes_per_step"}, {}},
      {"arithmetic_intensity",
       "REAL",
       {"cost", "arithmetic_intensity"},
       {},
       "Arithmetic intensity",
       "FLOP/byte",
       true,
       false},
      {"memory_estimate_bytes",
       "REAL",
       {"cost", "memory_estimate_bytes", "total"},
       {},
       "Estimated memory",
       "bytes",
       false,
       false},
      // "analytic" (the family's cost description) or "profiler" (counted from one profiled
      // step, for models without one: TorchScript files).
      {"cost_source", "TEXT", {"cost", "source"}, {}},
      {"roofline_bound", "TEXT", {"roofline", "bound"}, {}},
      // Data-parallel runs (docs/scale-out.md): written by runner/distributed.cc.
      {"workers", "INTEGER", {"distributed", "workers"}, {}},
      {"per_worker_examples_per_s", "REAL", {"distributed", "per_worker_examples_per_s"}, {}},
      {"comm_share", "REAL", {"distributed", "comm_share"}, {}},
      {"allreduce_bytes_per_step", "REAL", {"distributed", "allreduce_bytes_per_step"}, {}},
      // Repetitions in fresh processes (record/repetitions.h); every repetition's timing
      // stays in the stored result. NULL in stores from before repetitions existed.
      {"repetitions", "INTEGER", {"repetitions", "count"}, {}},
      {"rep_cv", "REAL", {"repetitions", "between_processes", "cv"}, {}},
      {"rep_max_over_min", "REAL", {"repetitions", "between_processes", "max_over_min"}, {}},
      {"rep_ci95_relative", "REAL", {"repetitions", "between_processes", "ci95_relative"}, {}},
      {"unstable", "INTEGER", {"unstable"}, {}},
      // Families with a model-FLOPs convention (gpt: docs/cost-model.md): that count per step,
      // and MFU, model FLOPs per second over the platform's peak. flops_utilization, from what
      // the cost description says runs, is then the hardware FLOPS utilization (HFU).
      {"model_flops_per_step", "REAL", {"cost", "model_flops", "per_step"}, {}},
      {"mfu",
       "REAL",
       {"metrics", "mfu"},
       [](R r) {
         const double f = r.cost.model_flops.total;
         if (f <= 0 || !r.peak_flops || *r.peak_flops <= 0 || r.steps.mean <= 0)
           return json(nullptr);
         return json(f / r.steps.mean / *r.peak_flops);
       },
       "Model FLOPS utilization (MFU)",
       "fraction of peak",
       true},

      // In the JSON only.
      {"", "", {"metrics", "examples_per_step"}, [](R r) { return json(r.examples_per_step); }},
      {"", "", {"metrics", "units_per_step"}, [](R r) { return json(r.units_per_step); }},
      {"", "", {"metrics", "cpu_utilization_system"}, [](R r) { return json(r.cpu.system); }},
      {"", "", {"metrics", "cpu_utilization_per_core"}, [](R r) { return json(r.cpu.per_core); }},
      {"", "", {"timing", "min_s"}, [](R r) { return json(r.steps.min); }},
      {"", "", {"timing", "max_s"}, [](R r) { return json(r.steps.max); }},
      {"", "", {"timing", "stddev_s"}, [](R r) { return json(r.steps.stddev); }},
      {"", "", {"timing", "ci95_half_width_s"}, [](R r) { return json(r.steps.ci.half_width); }},
      {"", "", {"timing", "ci_batch_means"}, [](R r) { return json(r.steps.ci.batches); }},
      {"", "", {"timing", "steps"}, [](R r) { return json(r.steps.steps); }},
      {"", "", {"timing", "stationary"}, [](R r) { return json(r.steps.stationary); }},
      {"", "", {"timing", "timed_wall_s"}, [](R r) { return json(r.steps.wall_s); }},
      {"",
       "",
       {"timing", "phases_s"},
       [](R r) { return r.phase_s.empty() ? json(nullptr) : json(r.phase_s); }},
      // The same, as columns: written with timing.phases_s above, read by simulate --validate.
      {"phase_forward_s", "REAL", {"timing", "phases_s", "forward"}, {}},
      {"phase_backward_s", "REAL", {"timing", "phases_s", "backward"}, {}},
      {"phase_optimizer_s", "REAL", {"timing", "phases_s", "optimizer"}, {}},
  };
}

}  // namespace

const std::vector<Metric>& metric_table() {
  static const std::vector<Metric> table = make_table();
  return table;
}

const json* json_at(const json& j, const std::vector<std::string>& path) {
  const json* cur = &j;
  for (const auto& k : path) {
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
  }
  return cur->is_null() ? nullptr : cur;
}

const json* metric_value(const json& result, const Metric& m) { return json_at(result, m.path); }

}  // namespace tb
