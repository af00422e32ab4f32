#include "jobs/repeat.h"

#include "cost/cost.h"
#include "record/json.h"
#include "record/repetitions.h"

namespace tb {

nlohmann::json result_of(const ChildOutcome& r, const Config& c) {
  nlohmann::json result = r.result;
  if (result.is_null()) {
    RunResult dead;
    dead.config = c.str();
    dead.family = c.family();
    dead.status = r.status;
    dead.error = r.error;
    dead.device = c.get("device");
    if (has_cost(c.family())) dead.cost = step_cost(c);
    result = to_json(dead, false);
  }
  if (!r.stderr_tail.empty() && r.status != Status::kOk) result["stderr_tail"] = r.stderr_tail;
  return result;
}

std::vector<nlohmann::json> run_repeated(
    const std::vector<JobSpec>& jobs, int repetitions, const ChildOptions& options,
    const std::function<void(size_t, int, const nlohmann::json&)>& on_result) {
  std::vector<nlohmann::json> combined(jobs.size());
  for (int rep = 0; rep < repetitions; ++rep)
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (rep > 0 && combined[i].value("status", "") != "ok") continue;
      const ChildOutcome out = run_child(jobs[i].args(), options);
      if (out.interrupted) return combined;
      if (out.harness_error)
        throw std::runtime_error("could not start a repetition of " + jobs[i].config.str() + ": " +
                                 out.error);
      const nlohmann::json result = result_of(out, jobs[i].config);
      on_result(i, rep + 1, result);
      combined[i] = add_repetition(combined[i], result);
    }
  return combined;
}

}  // namespace tb
