#pragma once
// Which configs of a sweep run here, and in what order: the sweep's grid, filtered, sampled,
// ordered and cut to this machine's shard. `trainbench sweep` parses its flags into a
// PlanRequest, calls plan_sweep and runs (or, with --dry-run, lists) the plan.
#include <cstdint>
#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/sweep.h"

namespace tb {

struct PlanRequest {
  std::string filter;                 // "nodes>=1024,batch=512": keep configs matching all
  size_t sample = 0;                  // > 0: a sample of this many configs
  uint64_t seed = 1;                  // of the sample
  bool lhs = false;                   // Latin hypercube over the axes (default: uniform)
  std::vector<std::string> stratify;  // spread the sample evenly over these axes' cells
  std::string order = "grid";         // grid | cost (cheapest step first)
  std::string shard;                  // "i/n", "auto" (from an MPI or Slurm launcher) or ""
};

struct SweepPlan {
  std::vector<Config> configs;
  std::vector<InvalidCell> invalid;  // combinations of the grid left out (spec/sweep.h)
  std::vector<std::string> notes;    // what the request did that it did not say (one line each)
  // Configs left out because, with threads=0 read as this machine's cores (as the sweep runs
  // and stores it), they are another config of the plan (threads=[0, 2] on two cores).
  std::vector<std::string> same_as_all_cores;
  // Set when the configs are one shard of several (shard_count > 1); `auto` also names where
  // the rank came from ("OMPI_COMM_WORLD_RANK", ...).
  int shard_index = 0, shard_count = 0;
  std::string shard_source;
};

// The config as the sweep runs and stores it: threads=0 (all cores) as this machine's count.
Config with_threads_resolved(Config c);

// Throws UsageError for a bad filter, sample or shard request, naming it.
SweepPlan plan_sweep(const SweepSpec& spec, const PlanRequest& request);

}  // namespace tb
