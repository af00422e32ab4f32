#pragma once
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "record/result.h"

namespace tb {

// The outcome of one config run in a child process (the trainbench binary itself), so a
// crash, an abort, an OOM kill or a hang costs that config only.
struct ChildOutcome {
  Status status = Status::kCrashed;
  nlohmann::json result;    // the child's result object when it printed one
  std::string error;        // why, when the child did not report it itself
  std::string stderr_tail;  // the last lines the child wrote to stderr
  double wall_s = 0;
  bool interrupted = false;    // stopped because `stop` was set: record nothing
  bool harness_error = false;  // the child could not be started: record nothing
};

struct ChildOptions {
  std::string binary;     // path of the trainbench executable
  double timeout_s = 60;  // whole child, start-up included
  // Bytes of private writable memory (RLIMIT_DATA: heap and anonymous mappings, not the
  // address space libraries and thread reservations take); 0: none.
  int64_t memory_limit = 0;
  const std::atomic<bool>* stop = nullptr;
};

// Runs `binary args...`, expecting `trainbench run --json` output on stdout.
ChildOutcome run_child(const std::vector<std::string>& args, const ChildOptions& options);

}  // namespace tb
