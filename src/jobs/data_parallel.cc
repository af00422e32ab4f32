#include "jobs/data_parallel.h"

#include "jobs/launcher.h"

namespace tb {

DataParallelOutcome run_data_parallel(const JobSpec& worker, const RunOptions& options,
                                      const std::optional<DistEnv>& rank_env) {
  DataParallelOutcome out;
  if (rank_env) {
    out.result = run_distributed(worker.config, options, *rank_env, worker.dist);
    return out;
  }
  LaunchOptions lo;
  lo.args = worker.args();
  lo.workers = int(worker.config.get_int("workers"));
  lo.timeout_s = worker.dist.timeout_s;
  const LaunchOutcome launched = launch_local(lo);
  RunResult& r = out.result;
  r.config = worker.config.str();
  r.family = worker.config.family();
  if (!launched.result.is_null()) {
    out.launched = launched.result;
    r.status = status_from_string(launched.result.value("status", "crashed"));
    r.error = launched.result.value("error", "");
  } else {
    r.status = Status::kCrashed;
    for (const auto& e : launched.errors) r.error += (r.error.empty() ? "" : "; ") + e;
    if (r.error.empty()) r.error = "the workers printed no result";
  }
  return out;
}

}  // namespace tb
