#pragma once
// Starts the N worker processes of a data-parallel run on this machine, as torchrun
// would: trainbench hosts the rendezvous store itself and gives each worker the usual
// environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tb {

struct LaunchOptions {
  std::string binary = "/proc/self/exe";
  std::vector<std::string> args;  // every rank's arguments: run CONFIG --json ...
  int workers = 2;
  // How long the others may go on once one worker has failed, on top of the workers'
  // own communication timeout, before they are killed.
  double timeout_s = 60;
};

struct LaunchOutcome {
  nlohmann::json result;            // rank 0's result object, when it printed one
  std::vector<std::string> errors;  // one line per worker that failed, and why
  int exit_status = 0;              // rank 0's, or 1 when it printed nothing
};

// Runs the workers to the end. Throws std::runtime_error only when they cannot be
// started at all.
LaunchOutcome launch_local(const LaunchOptions& options);

}  // namespace tb
