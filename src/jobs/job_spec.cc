#include "jobs/job_spec.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "spec/printable.h"

namespace tb {

using nlohmann::json;

namespace {

// Shortest text that reads back as the same double, as the child's option parser reads it.
std::string number(double v) { return fmt::format("{}", v); }

bool data_parallel(const Config& c) {
  return c.schema().find("workers") && c.get_int("workers") > 1;
}

}  // namespace

std::vector<std::string> JobSpec::args() const {
  if (kind == Kind::kProfile)
    return {"profile", config.str(), "--json", "--steps", std::to_string(profile_steps)};
  std::vector<std::string> v = {"run",
                                config.str(),
                                "--json",
                                "--target-ci",
                                number(timing.target_rel_ci),
                                "--budget",
                                number(timing.budget_s),
                                "--min-samples",
                                std::to_string(timing.min_samples),
                                "--min-time",
                                number(timing.min_time_s),
                                "--seed",
                                std::to_string(seed)};
  if (timing.fixed_steps > 0) v.insert(v.end(), {"--steps", std::to_string(timing.fixed_steps)});
  if (timing.max_steps > 0) v.insert(v.end(), {"--max-steps", std::to_string(timing.max_steps)});
  if (!stack.is_default()) v.insert(v.end(), {"--stack", stack.str()});
  if (!platform.empty()) v.insert(v.end(), {"--platform", platform});
  if (peak_gflops > 0) v.insert(v.end(), {"--peak-gflops", number(peak_gflops)});
  if (memory_limit_gib > 0) v.insert(v.end(), {"--memory-limit", number(memory_limit_gib)});
  if (data_parallel(config))
    v.insert(v.end(),
             {"--dist-timeout", number(dist.timeout_s), "--bucket-mib", number(dist.bucket_mib)});
  return v;
}

json JobSpec::to_json() const {
  if (kind == Kind::kProfile)
    return {{"kind", "profile"}, {"config", config.str()}, {"profile_steps", profile_steps}};
  json j = {{"kind", "run"},
            {"config", config.str()},
            {"target_ci", timing.target_rel_ci},
            {"budget_s", timing.budget_s},
            {"min_samples", timing.min_samples},
            {"min_time_s", timing.min_time_s},
            {"fixed_steps", timing.fixed_steps},
            {"max_steps", timing.max_steps},
            {"seed", seed},
            {"stack", stack.is_default() ? "" : stack.str()},
            {"platform", platform},
            {"peak_gflops", peak_gflops},
            {"memory_limit_gib", memory_limit_gib}};
  if (data_parallel(config))
    j["dist"] = {{"timeout_s", dist.timeout_s}, {"bucket_mib", dist.bucket_mib}};
  return j;
}

JobSpec job_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("job: expected a JSON object, got " + printable(j.dump()));
  JobSpec s;
  // One field's value, or a UsageError naming it: the type checks of nlohmann::json say
  // nothing about which field was wrong.
  const auto get = [&](const json& obj, const char* key, auto& out) {
    if (!obj.contains(key)) return;
    try {
      out = obj.at(key).get<std::decay_t<decltype(out)>>();
    } catch (const json::exception&) {
      throw UsageError(std::string("job: field '") + key +
                       "' has the wrong type: " + printable(obj.at(key).dump()));
    }
  };
  std::string kind = "run", config, stack;
  get(j, "kind", kind);
  if (kind == "run")
    s.kind = JobSpec::Kind::kRun;
  else if (kind == "profile")
    s.kind = JobSpec::Kind::kProfile;
  else
    throw UsageError("job: kind '" + printable(kind) + "' is not run or profile");
  get(j, "config", config);
  if (config.empty()) throw UsageError("job: field 'config' is missing");
  s.config = parse_config(config);
  get(j, "profile_steps", s.profile_steps);
  get(j, "target_ci", s.timing.target_rel_ci);
  get(j, "budget_s", s.timing.budget_s);
  get(j, "min_samples", s.timing.min_samples);
  get(j, "min_time_s", s.timing.min_time_s);
  get(j, "fixed_steps", s.timing.fixed_steps);
  get(j, "max_steps", s.timing.max_steps);
  get(j, "seed", s.seed);
  get(j, "stack", stack);
  if (!stack.empty()) s.stack = parse_stack(stack);
  get(j, "platform", s.platform);
  get(j, "peak_gflops", s.peak_gflops);
  get(j, "memory_limit_gib", s.memory_limit_gib);
  if (j.contains("dist")) {
    get(j["dist"], "timeout_s", s.dist.timeout_s);
    get(j["dist"], "bucket_mib", s.dist.bucket_mib);
  }
  if (s.profile_steps < 1)
    throw UsageError("job: profile_steps " + std::to_string(s.profile_steps) + " is not positive");
  if (!(s.timing.budget_s > 0))
    throw UsageError("job: budget_s " + number(s.timing.budget_s) + " is not positive");
  return s;
}

}  // namespace tb
