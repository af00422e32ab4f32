#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "record/repetitions.h"
#include "record/result.h"
#include "spec/config.h"
#include "spec/stack.h"
#include "store/store.h"

namespace tb {

struct SweepOptions {
  std::string binary;  // the trainbench executable that runs each config
  std::string sweep_name;
  double budget_s = 10;  // per config: the timed loop
  double timeout_s = 0;  // per config: the whole child; 0: 3 x budget + 60 s
  double target_ci = 0.01;
  double sweep_budget_s = 0;  // 0: none; past it no new config starts
  int64_t memory_limit = 0;   // bytes per child; 0: 90% of the memory available at start
  bool rerun = false;         // run configs the store already has for this platform/stack
  bool retry_failed = false;  // run again those recorded crashed, oom or timeout
  // Also profile every config that ran ok (`trainbench profile` in its own process) and
  // record the per-operator profile in the store. Costs a few extra steps per config.
  bool profile = false;
  // Software stacks each config runs under, in order; empty: the default stack. Only
  // the default stack's runs are profiled (`profile` has no stack option).
  std::vector<StackSpec> stacks;
  int profile_steps = 3;
  // Independent measurements of every config, each in its own process, interleaved: every
  // config's first, then every config's second, ... (record/repetitions.h). A config
  // stored with fewer is topped up when the sweep is resumed.
  int repetitions = 1;
  const std::atomic<bool>* stop = nullptr;  // set by Ctrl-C: stop, record nothing unfinished
};

// What happened to one config, for progress displays.
struct SweepEvent {
  size_t index = 0, total = 0;  // over configs x stacks x repetitions
  int repetition = 1, repetitions = 1;
  std::string config;
  std::string outcome;  // a status word, or "skipped" (already in the store), or "running"
  std::string detail;   // error or a short metric
  double wall_s = 0;
};

struct SweepSummary {
  // Counted per process slot (config x stack x repetition).
  size_t total = 0, ran = 0, ok = 0, failed = 0, skipped = 0, predicted_oom = 0;
  int repetitions = 1;
  size_t unstable = 0;  // configs whose repetitions disagree (record/repetitions.h)
  size_t profiled = 0;  // with SweepOptions::profile
  bool interrupted = false, out_of_budget = false;
  std::string harness_error;  // why the sweep stopped early without the config's fault
  double wall_s = 0;
  // Round by round over the sweep's configs as stored at its end (earlier invocations'
  // processes included): what every config of a round shared, against each config's own spread.
  RoundDrift drift;
};

// The identities that make results comparable: this host (hardware and its cached
// measured description) and the software stack. Stored once per store.
nlohmann::json platform_identity();
nlohmann::json stack_identity();

// The platform row of this host in a store, as every stored result names it: the cached
// measured description when there is one, else the host's name.
int64_t host_platform_id(Store& store);

// Runs each config in its own child process and records every finished one in the store
// in its own transaction; configs predicted not to fit are recorded as oom-predicted
// without running.
SweepSummary run_sweep(const std::vector<Config>& configs, Store& store, const SweepOptions& o,
                       const std::function<void(const SweepEvent&)>& on_event);

}  // namespace tb
