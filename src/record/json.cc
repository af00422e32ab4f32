#include "record/json.h"

#include "record/metrics.h"
#include "record/repetitions.h"

namespace tb {

using nlohmann::json;

json to_json(const Context& c) {
  const json round_trip = c.core_round_trip
                              ? json{{"cpus", {c.core_round_trip->cpu_a, c.core_round_trip->cpu_b}},
                                     {"ns", c.core_round_trip->ns}}
                              : json(nullptr);
  return {{"host",
           {{"hostname", c.host.hostname},
            {"os", c.host.os},
            {"cpu_model", c.host.cpu_model},
            {"logical_cpus", c.host.logical_cpus},
            {"memory_total_bytes", c.host.mem_total},
            {"memory_available_bytes", c.host.mem_available},
            {"simd", c.host.simd}}},
          {"libraries",
           {{"libtorch", c.libtorch_version},
            {"blas",
             {{"name", c.blas.name},
              {"variant", c.blas.variant},
              {"library", c.blas.library},
              {"version", c.blas.version},
              {"threads", c.blas.threads}}},
            {"onednn", c.onednn},
            {"compiler", c.compiler}}},
          {"runtime",
           {{"intra_op_threads", c.openmp_threads},
            {"flush_denormal", c.flush_denormal},
            {"cpu_affinity", c.affinity},
            {"blas_thread_pool", c.blas_pool},
            {"core_round_trip", round_trip},
            {"environment", json(std::map<std::string, std::string>(c.runtime_env.begin(),
                                                                    c.runtime_env.end()))}}},
          {"trainbench", {{"version", c.trainbench_version}, {"git_revision", c.git_revision}}}};
}

json to_json(const StepCost& c, bool with_layers) {
  json j = {{"source", c.source},
            {"params", c.params},
            {"flops_per_step", c.flops()},
            {"forward_flops", c.fwd_flops},
            {"forward_matmul_flops", c.fwd_matmul_flops},
            {"backward_flops", c.bwd_flops},
            {"optimizer_flops", c.opt_flops},
            {"bytes_per_step", c.bytes},
            {"arithmetic_intensity", c.intensity()},
            {"memory_estimate_bytes",
             {{"weights", c.memory.weights},
              {"gradients", c.memory.gradients},
              {"optimizer_state", c.memory.optimizer_state},
              {"feature_maps", c.memory.feature_maps},
              {"inputs", c.memory.inputs},
              {"workspace", c.memory.workspace},
              {"total", c.memory.total()}}}};
  if (!c.memory.references.empty()) {
    json refs = json::array();
    for (const auto& r : c.memory.references)
      refs.push_back({{"label", r.label}, {"bytes", r.bytes}});
    j["memory_references"] = refs;
  }
  if (c.model_flops.total > 0)
    j["model_flops"] = {{"per_step", c.model_flops.total},
                        {"per_step_causal", c.model_flops.causal},
                        {"parts", c.model_flops.parts}};
  if (c.data_parallel.workers > 1)
    j["data_parallel"] = {{"workers", c.data_parallel.workers},
                          {"zero", c.data_parallel.zero},
                          {"shard_params", c.data_parallel.shard},
                          {"ideal_bytes_per_step", c.data_parallel.ideal_bytes_per_step},
                          {"run_bytes_per_step", c.data_parallel.run_bytes_per_step}};
  if (with_layers) {
    json layers = json::array();
    for (const auto& l : c.layers)
      layers.push_back({{"name", l.name},
                        {"op", l.op},
                        {"params", l.params},
                        {"forward_flops", l.fwd_flops},
                        {"forward_matmul_flops", l.fwd_matmul_flops},
                        {"backward_input_flops", l.bwd_input_flops},
                        {"backward_weight_flops", l.bwd_weight_flops},
                        {"bytes_read", l.bytes_read},
                        {"bytes_written", l.bytes_written},
                        {"saved_bytes", l.saved_bytes}});
    j["layers"] = layers;
  }
  return j;
}

json to_json(const RunResult& r, bool with_layers) {
  json j = {{"config", r.config},
            {"family", r.family},
            {"status", to_string(r.status)},
            {"error", r.error},
            {"device", r.device},
            {"threads", r.threads},
            {"blas_threads", r.blas_threads},
            {"started_at", r.started_at},
            {"finished_at", r.finished_at},
            {"cost", to_json(r.cost, with_layers)}};
  // Only a requested stack is recorded, so results of the default stack keep their shape.
  if (!r.stack.empty()) {
    j["stack"] = r.stack;
    j["stack_detected"] = r.stack_detected;
    j["stack_mismatch"] = r.stack_mismatch.empty() ? json(nullptr) : json(r.stack_mismatch);
  }
  if (r.status != Status::kOk) return j;
  j["step_times_s"] = r.step_times;
  if (r.roofline) {
    const auto& p = *r.roofline;
    j["roofline"] = {{"platform", p.platform},
                     {"dtype", p.dtype},
                     {"peak_flops", p.peak_flops},
                     {"bandwidth_bytes_per_s", p.bandwidth},
                     {"ridge", p.ridge},
                     {"intensity", p.intensity},
                     {"attainable_flops", p.attainable},
                     {"achieved_flops", p.achieved},
                     {"bound", p.memory_bound ? "memory" : "compute"},
                     {"fraction_of_roof", p.fraction_of_roof()}};
  }
  for (const Metric& m : metric_table()) {
    if (!m.value) continue;
    json* at = &j;
    for (const auto& k : m.path) at = &(*at)[k];
    *at = m.value(r);
  }
  if (!r.distributed.is_null()) j["distributed"] = r.distributed;
  mark_single_process(j);
  return j;
}

double number_or(const json& j, const char* key, double fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<double>();
}

json document(const std::string& kind, const json& fields) {
  json doc = {
      {"schema_version", kSchemaVersion}, {"kind", kind}, {"context", to_json(current_context())}};
  for (const auto& [k, v] : fields.items()) doc[k] = v;
  return doc;
}

json run_document(const Context& c, const std::vector<RunResult>& results, bool with_layers) {
  json rs = json::array();
  for (const auto& r : results) rs.push_back(to_json(r, with_layers));
  return {{"schema_version", kSchemaVersion},
          {"kind", "trainbench.run"},
          {"context", to_json(c)},
          {"results", rs}};
}

}  // namespace tb
