#pragma once
// Data-parallel training across worker processes with LibTorch's c10d process groups
// (Gloo on CPU). Each worker trains its own copy of the model on its own synthetic
// batch of `batch` examples; gradients are summed across workers every step, in buckets
// launched from autograd hooks while backward is still running, then averaged.
#include <optional>
#include <string>

#include "record/result.h"
#include "runner/runner.h"
#include "spec/config.h"

namespace tb {

// Where this process sits in a job, from the environment an outside launcher sets
// (torchrun: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; Slurm's srun: SLURM_PROCID,
// SLURM_NTASKS) or the one trainbench's own local launcher sets.
struct DistEnv {
  int rank = 0;
  int world = 1;
  std::string master_addr;
  int master_port = 0;
  bool store_hosted = false;  // the launcher hosts the TCP store: rank 0 connects as a client
  bool local = false;         // every worker on this machine (trainbench launched them)
};

// The rank environment when this process is one rank of a job, nullopt when none is
// set. Throws UsageError for a partial or malformed one, naming the variable.
std::optional<DistEnv> dist_env_from_environment();

struct DistOptions {
  double timeout_s = 60;   // joining, and any one collective: a missing worker ends the run
  double bucket_mib = 25;  // gradient bucket size (DDP's default)
};

// Trains `config` as one rank of a job of config.workers ranks. On rank 0 the result
// describes the whole job (aggregate throughput, per-worker figures, communication);
// other ranks return their own. A worker that dies or does not join within the
// timeout ends every rank with status crashed and an error naming what happened.
RunResult run_distributed(const Config& config, const RunOptions& options, const DistEnv& env,
                          const DistOptions& dist);

}  // namespace tb
