#pragma once
// What `trainbench profile` measures: every operator of a window of steady-state steps,
// aggregated by name, input shapes and phase. All figures are per step (the window's
// totals divided by its steps), so profiles of different lengths compare directly.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "record/utilization.h"

namespace tb {

struct OpStats {
  std::string name;      // as the profiler names it: aten::addmm, AddmmBackward0, ...
  std::string shapes;    // its input shapes, "64x256, 256x256"; "-" for a non-tensor argument
  std::string phase;     // forward, backward, optimizer, other
  std::string op_class;  // matmul, conv, elementwise, ... (cost::op_class)
  // The model part it belongs to where the family marks parts (gpt: attention_scores,
  // projections, mlp, logits; model/phase.h's PartScope), backward operators included; "" none.
  std::string part;
  double calls = 0;
  double total_us = 0, self_us = 0;  // total includes the operators it calls
  // Analytic FLOPs and bytes, counted once: at the outermost operator the cost table knows
  // (or the profiler counts), never again at the operators it calls.
  double flops = 0, bytes = 0;
  std::string flops_source;   // "model" (cost::op_cost), "profiler" (LibTorch's count), ""
  double profiler_flops = 0;  // LibTorch's own count where it has one
  // Over the operator's total time, which includes the work its FLOPs account for.
  double achieved_flops() const { return total_us > 0 ? flops / (total_us * 1e-6) : 0; }
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

struct Profile {
  std::string config;
  std::string dtype;
  int warmup_steps = 0, steps = 0;
  double step_us = 0;  // mean wall time of a profiled step (profiler overhead included)
  // The same steps without the profiler, on the C library's allocator where the profiled ones
  // reuse their blocks (runner/block_cache.h): the profiler's overhead, that aside.
  double unprofiled_step_us = 0;
  std::map<std::string, double> phase_us;           // forward, backward, optimizer, other: per step
  double flops = 0, bytes = 0;                      // per step, the sum over operators
  double model_flops = 0;                           // the cost model's FLOPs per step
  std::map<std::string, double> model_phase_flops;  // forward, backward, optimizer
  std::map<std::string, double> model_part_flops;   // the cost's model FLOPs by part (gpt)
  Utilization utilization;
  std::vector<OpStats> ops;  // by self time, longest first

  double achieved_flops() const { return step_us > 0 ? flops / (step_us * 1e-6) : 0; }
  // Per-operator utilization against the platform peak, when one is known.
  std::optional<double> op_utilization(const OpStats& op) const;
  // Operators whose achieved FLOP/s exceeds the peak, highest first: impossible for a
  // correct count on a correct peak, so the profile says so instead of printing it quietly.
  std::vector<const OpStats*> above_peak() const;
  // TBD tables V/VI: operators with FLOPs whose achieved FLOP/s is below the step's
  // average, longest (total time) first.
  std::vector<const OpStats*> below_average(size_t n) const;
  std::vector<const OpStats*> top_by_self_time(size_t n) const;
  // Self time per operator class and per phase, per step.
  std::map<std::string, double> class_self_us() const;
  std::map<std::string, double> phase_flops() const;
  // Per model part (operators with a part only): self time, and FLOPs of matrix products
  // (what the cost description's model FLOPs count), per step. Empty without parts.
  std::map<std::string, double> part_self_us() const;
  std::map<std::string, double> part_matmul_flops() const;
};

nlohmann::json to_json(const Utilization& u);
nlohmann::json to_json(const Profile& p);
Profile profile_from_json(const nlohmann::json& j);

// One complete event of a Chrome trace (chrome://tracing, Perfetto): times in microseconds.
struct TraceEvent {
  std::string name, category;
  double ts_us = 0, dur_us = 0;
  uint64_t tid = 0;
  nlohmann::json args = nlohmann::json::object();
};
// The Chrome trace JSON object format: {"traceEvents": [...ph "X"...], "displayTimeUnit"}.
nlohmann::json chrome_trace(const std::vector<TraceEvent>& events, const std::string& title);

}  // namespace tb
