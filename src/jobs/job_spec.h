#pragma once
// What one child trainbench process is asked to do: the contract between a process that
// starts others (a sweep, `run --repetitions`, the local launcher of data-parallel workers)
// and the child it starts. Its command line is written here only; its JSON form lets a job be
// logged, stored or handed to another machine and read back.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/distributed.h"
#include "runner/steady_state.h"
#include "spec/config.h"
#include "spec/stack.h"

namespace tb {

struct JobSpec {
  enum class Kind { kRun, kProfile };
  Kind kind = Kind::kRun;
  Config config;
  StackSpec stack;  // run only; the default stack adds nothing to the command line
  // run: the steady-state rule, the seed and the platform the result is placed against.
  SteadyStateOptions timing;
  uint64_t seed = 1;
  std::string platform;         // a registry name or file; empty: the child's cached description
  double peak_gflops = 0;       // 0: the platform's
  double memory_limit_gib = 0;  // 0: what the child finds available
  DistOptions dist;             // passed only when the config has workers > 1
  int profile_steps = 3;        // profile only

  // The child's arguments after the program name, always with --json (the parent reads the
  // result from its stdout).
  std::vector<std::string> args() const;
  nlohmann::json to_json() const;
};

// Reads a job written by JobSpec::to_json; a missing field keeps its default. Throws
// UsageError naming the bad field or value.
JobSpec job_from_json(const nlohmann::json& j);

}  // namespace tb
