#include "record/profile.h"

#include <unistd.h>

#include <algorithm>

namespace tb {

using nlohmann::json;

std::optional<double> Profile::op_utilization(const OpStats& op) const {
  const auto& peak = utilization.peak_flops;
  if (!peak || *peak <= 0 || op.flops <= 0) return std::nullopt;
  return op.achieved_flops() / *peak;
}

std::vector<const OpStats*> Profile::above_peak() const {
  std::vector<const OpStats*> out;
  for (const auto& op : ops)
    if (const auto u = op_utilization(op); u && *u > 1) out.push_back(&op);
  std::stable_sort(out.begin(), out.end(), [&](const OpStats* a, const OpStats* b) {
    return a->achieved_flops() > b->achieved_flops();
  });
  return out;
}

std::vector<const OpStats*> Profile::below_average(size_t n) const {
  const double average = achieved_flops();
  std::vector<const OpStats*> out;
  for (const auto& op : ops)
    if (op.flops > 0 && op.total_us > 0 && op.achieved_flops() < average) out.push_back(&op);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpStats* a, const OpStats* b) { return a->total_us > b->total_us; });
  if (out.size() > n) out.resize(n);
  return out;
}

std::vector<const OpStats*> Profile::top_by_self_time(size_t n) const {
  std::vector<const OpStats*> out;
  for (const auto& op : ops) out.push_back(&op);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpStats* a, const OpStats* b) { return a->self_us > b->self_us; });
  if (out.size() > n) out.resize(n);
  return out;
}

std::map<std::string, double> Profile::class_self_us() const {
  std::map<std::string, double> out;
  for (const auto& op : ops) out[op.op_class] += op.self_us;
  return out;
}

std::map<std::string, double> Profile::phase_flops() const {
  std::map<std::string, double> out;
  for (const auto& op : ops) out[op.phase] += op.flops;
  return out;
}

std::map<std::string, double> Profile::part_self_us() const {
  std::map<std::string, double> out;
  for (const auto& op : ops)
    if (!op.part.empty()) out[op.part] += op.self_us;
  return out;
}

std::map<std::string, double> Profile::part_matmul_flops() const {
  std::map<std::string, double> out;
  for (const auto& op : ops)
    if (!op.part.empty()) out[op.part] += op.op_class == "matmul" ? op.flops : 0.0;
  return out;
}

json to_json(const Utilization& u) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"device", u.device},
          {"elapsed_s", u.elapsed_s},
          {"active_s", u.active_s},
          {"compute_utilization", opt(u.compute)},
          {"fp_utilization", opt(u.fp)},
          {"fp_utilization_elapsed", opt(u.fp_elapsed)},
          {"dtype", u.dtype},
          {"peak_flops", opt(u.peak_flops)},
          {"cpu_utilization_process", u.cpu.process},
          {"cpu_utilization_system", u.cpu.system},
          {"cpu_utilization_per_core", u.cpu.per_core},
          {"threads",
           {{"threads", u.threads.threads},
            {"threads_used", u.threads.threads_used},
            {"computing_s", u.threads.computing_s},
            {"runnable_wait_s", u.threads.runnable_wait_s},
            {"blocked_s", u.threads.blocked_s},
            {"has_schedstat", u.threads.has_schedstat},
            {"window_s", u.threads.elapsed_s},
            {"steps", u.threads.steps}}}};
}

namespace {

Utilization utilization_from_json(const json& j) {
  auto opt = [&](const char* k) -> std::optional<double> {
    return j.contains(k) && !j[k].is_null() ? std::optional<double>(j[k].get<double>())
                                            : std::nullopt;
  };
  Utilization u;
  u.device = j.value("device", "cpu");
  u.elapsed_s = j.value("elapsed_s", 0.0);
  u.active_s = j.value("active_s", 0.0);
  u.compute = opt("compute_utilization");
  u.fp = opt("fp_utilization");
  u.fp_elapsed = opt("fp_utilization_elapsed");
  u.dtype = j.value("dtype", "");
  u.peak_flops = opt("peak_flops");
  u.cpu.process = j.value("cpu_utilization_process", 0.0);
  u.cpu.system = j.value("cpu_utilization_system", 0.0);
  u.cpu.per_core = j.value("cpu_utilization_per_core", std::vector<double>());
  if (j.contains("threads")) {
    const json& t = j["threads"];
    u.threads.threads = t.value("threads", 0);
    u.threads.threads_used = t.value("threads_used", 0);
    u.threads.computing_s = t.value("computing_s", 0.0);
    u.threads.runnable_wait_s = t.value("runnable_wait_s", 0.0);
    u.threads.blocked_s = t.value("blocked_s", 0.0);
    u.threads.has_schedstat = t.value("has_schedstat", false);
    u.threads.elapsed_s = t.value("window_s", 0.0);
    u.threads.steps = t.value("steps", int64_t(0));
  }
  return u;
}

}  // namespace

json to_json(const Profile& p) {
  json ops = json::array();
  for (const auto& o : p.ops) {
    const auto u = p.op_utilization(o);
    ops.push_back({{"name", o.name},
                   {"shapes", o.shapes},
                   {"phase", o.phase},
                   {"class", o.op_class},
                   {"part", o.part},
                   {"calls", o.calls},
                   {"total_us", o.total_us},
                   {"self_us", o.self_us},
                   {"share_of_step", p.step_us > 0 ? o.self_us / p.step_us : 0},
                   {"flops", o.flops},
                   {"flops_source", o.flops_source},
                   {"profiler_flops", o.profiler_flops},
                   {"bytes", o.bytes},
                   {"achieved_flops", o.achieved_flops()},
                   {"arithmetic_intensity", o.intensity()},
                   {"utilization", u ? json(*u) : json(nullptr)}});
  }
  json below = json::array();
  for (const auto* o : p.below_average(5))
    below.push_back({{"name", o->name}, {"shapes", o->shapes}, {"phase", o->phase}});
  return {{"config", p.config},
          {"dtype", p.dtype},
          {"warmup_steps", p.warmup_steps},
          {"steps", p.steps},
          {"step_us", p.step_us},
          {"unprofiled_step_us", p.unprofiled_step_us},
          {"phase_us", p.phase_us},
          {"flops_per_step", p.flops},
          {"bytes_per_step", p.bytes},
          {"achieved_flops", p.achieved_flops()},
          {"model_flops_per_step", p.model_flops},
          {"model_phase_flops", p.model_phase_flops},
          {"phase_flops", p.phase_flops()},
          {"class_self_us", p.class_self_us()},
          {"model_part_flops", p.model_part_flops},
          {"part_self_us", p.part_self_us()},
          {"part_matmul_flops", p.part_matmul_flops()},
          {"utilization", to_json(p.utilization)},
          {"below_average", below},
          {"ops", ops}};
}

Profile profile_from_json(const json& j) {
  Profile p;
  p.config = j.value("config", "");
  p.dtype = j.value("dtype", "");
  p.warmup_steps = j.value("warmup_steps", 0);
  p.steps = j.value("steps", 0);
  p.step_us = j.value("step_us", 0.0);
  p.unprofiled_step_us = j.value("unprofiled_step_us", 0.0);
  p.phase_us = j.value("phase_us", std::map<std::string, double>());
  p.flops = j.value("flops_per_step", 0.0);
  p.bytes = j.value("bytes_per_step", 0.0);
  p.model_flops = j.value("model_flops_per_step", 0.0);
  p.model_phase_flops = j.value("model_phase_flops", std::map<std::string, double>());
  p.model_part_flops = j.value("model_part_flops", std::map<std::string, double>());
  if (j.contains("utilization")) p.utilization = utilization_from_json(j["utilization"]);
  for (const auto& o : j.value("ops", json::array())) {
    OpStats s;
    s.name = o.value("name", "");
    s.shapes = o.value("shapes", "");
    s.phase = o.value("phase", "");
    s.op_class = o.value("class", "");
    s.part = o.value("part", "");
    s.calls = o.value("calls", 0.0);
    s.total_us = o.value("total_us", 0.0);
    s.self_us = o.value("self_us", 0.0);
    s.flops = o.value("flops", 0.0);
    s.flops_source = o.value("flops_source", "");
    s.profiler_flops = o.value("profiler_flops", 0.0);
    s.bytes = o.value("bytes", 0.0);
    p.ops.push_back(std::move(s));
  }
  return p;
}

json chrome_trace(const std::vector<TraceEvent>& events, const std::string& title) {
  json list = json::array();
  const int pid = int(getpid());
  list.push_back({{"name", "process_name"},
                  {"ph", "M"},
                  {"pid", pid},
                  {"tid", 0},
                  {"args", {{"name", "trainbench " + title}}}});
  for (const auto& e : events)
    list.push_back({{"name", e.name},
                    {"cat", e.category},
                    {"ph", "X"},
                    {"ts", e.ts_us},
                    {"dur", e.dur_us},
                    {"pid", pid},
                    {"tid", e.tid},
                    {"args", e.args}});
  return {{"traceEvents", list}, {"displayTimeUnit", "ms"}};
}

}  // namespace tb
