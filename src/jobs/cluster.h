#pragma once
// Sweeps spread over a cluster without linking MPI: each rank of `mpirun` (or `srun`)
// takes its shard from the launcher's environment, writes its own store, and rank 0
// merges them when every shard has said it is done (docs/scale-out.md).
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "jobs/sweep_runner.h"

namespace tb {

// Shard (1-based I, N) of this process from OpenMPI (OMPI_COMM_WORLD_RANK/SIZE), MPICH
// or Intel MPI's PMI (PMI_RANK/PMI_SIZE), PMIx (PMIX_RANK with OMPI/PMI size) or Slurm
// (SLURM_PROCID/SLURM_NTASKS); nullopt when none is set. `source` names the variables.
std::optional<std::pair<int, int>> shard_from_launcher(std::string* source = nullptr);

// `out/sweep.db` -> `out/sweep.shard-2-of-4.db`.
std::string shard_store_path(const std::string& store, int i, int n);

// Leaves `<shard store>.done`, holding `note`, for the merging rank to find.
void mark_shard_done(const std::string& shard_store, const std::string& note);

// Waits until all N shards of `store` are marked done (at most timeout_s; 0: no limit),
// then merges their stores into `store`. Returns the number of runs added. Throws
// std::runtime_error naming the shards still missing when the time is up.
int64_t merge_shards(const std::string& store, int n, double timeout_s, std::ostream& log);

// After shard I of N of `store` has run (`summary`): marks it done, even when it stopped
// early, so the merging rank never waits for nothing; shard 1 then merges every shard into
// `store` (merge_shards, whose errors it throws).
void finish_shard(const std::string& store, int i, int n, const SweepSummary& summary,
                  double merge_timeout_s, std::ostream& log);

}  // namespace tb
