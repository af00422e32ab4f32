#pragma once
// A config with workers > 1 as `trainbench run` runs it: this process is one rank of a job
// started by torchrun or srun (the rank environment is set), or it starts the workers on this
// machine itself (jobs/launcher.h) and reports rank 0's result as the job's.
#include <nlohmann/json.hpp>
#include <optional>

#include "jobs/job_spec.h"
#include "record/result.h"
#include "runner/distributed.h"
#include "runner/runner.h"

namespace tb {

struct DataParallelOutcome {
  // The status and error always; the whole result on a rank of an external launcher.
  RunResult result;
  // With the local launcher: rank 0's result object, the job's own (per-worker figures and
  // communication included), to print and store in place of `result`. Null otherwise.
  nlohmann::json launched;
};

// `worker` is what every rank runs (its config has workers > 1); `rank_env` is this
// process's rank environment, or nullopt to launch the workers here.
DataParallelOutcome run_data_parallel(const JobSpec& worker, const RunOptions& options,
                                      const std::optional<DistEnv>& rank_env);

}  // namespace tb
