#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "platform/description.h"
#include "record/step_stats.h"
#include "record/utilization.h"

namespace tb {

// Every result states its outcome in this one field, with these words everywhere.
enum class Status { kOk, kOomPredicted, kOom, kTimeout, kCrashed, kUnsupported, kInvalid };
std::string to_string(Status s);
Status status_from_string(const std::string& s);  // throws std::invalid_argument

// One measured (or refused) config: what `trainbench run` prints and stores.
struct RunResult {
  std::string config;  // canonical, with threads resolved: paste it to re-run
  std::string family;
  Status status = Status::kOk;
  std::string error;     // why, for any status but ok
  int threads = 0;       // LibTorch intra-op threads
  int blas_threads = 0;  // the BLAS's own, where it can be asked
  std::string device;
  std::string stack;                    // the requested software stack, "" for the default
  nlohmann::json stack_detected;        // what ran: BLAS, its threads, oneDNN, mode, threads
  std::string stack_mismatch;           // why the detected stack differs from the request, or ""
  std::string started_at, finished_at;  // ISO 8601 UTC

  StepCost cost;  // analytic, from the cost description
  StepStats steps;
  std::vector<double> step_times;  // raw seconds, warm-up included
  // Mean wall seconds per step in each phase (forward, backward, optimizer; other: the rest of
  // the step), over the same steps as `steps`, from clock reads at the phases' edges
  // (model/phase.h); empty where not measured (data-parallel runs).
  std::map<std::string, double> phase_s;
  int64_t examples_per_step = 0;
  double examples_per_s = 0;
  // The family's own throughput unit (FamilySchema::throughput_unit; "unit" in JSON): images,
  // tokens, audio_s, frames; "examples" for generated families, where units_per_s ==
  // examples_per_s.
  std::string throughput_unit = "examples";
  double units_per_step = 0;
  double units_per_s = 0;
  double achieved_flops = 0;         // analytic FLOPs per step / mean step time
  std::optional<double> peak_flops;  // of the platform, when a description is available
  // The cores that peak is all of (the description's `cores`), when it states them: a run of
  // fewer threads can reach only their share of it (report/run_table.h prints that share).
  std::optional<int> peak_cores;
  std::optional<double> flops_utilization;
  std::optional<RooflinePlacement> roofline;
  CpuUsage cpu;
  // One cache line's round trip between the first two CPUs the run may use, taken just before
  // its timed loop (platform/core_latency.h), for runs of two threads or more on the CPU: the
  // host's placement of those CPUs, which such runs' step times follow on a VM.
  std::optional<double> core_round_trip_ns;
  // Data-parallel runs (workers > 1): per-worker figures and communication, as
  // runner/distributed.cc writes them; null otherwise.
  nlohmann::json distributed;
};

}  // namespace tb
