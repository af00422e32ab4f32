#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/sizes.h"
#include "record/context.h"
#include "record/result.h"

namespace tb {

// Human-readable views for a terminal.
std::string format_context(const Context& c);
std::string format_result(const RunResult& r);
// A result measured in several processes (`run --repetitions N`), from its JSON: the
// headline, the spread between processes and each process's own mean and CI.
std::string format_repeated(const nlohmann::json& result);
std::string format_cost_table(const StepCost& c);
// Where a run's CPU round trip before its timed loop (RunResult::core_round_trip_ns) and the
// context's, taken after the runs, differ twofold: the host moved the threads meanwhile, so the
// step times may mix two placements. One "placement" line per such run; "" otherwise.
std::string placement_moved(const std::vector<RunResult>& results, const Context& c);
// A data-parallel result (workers > 1), from its JSON: the job, then each worker.
std::string format_distributed(const nlohmann::json& result);

// "1.23 GFLOP/s", "3.2 ms": one place for units (bytes: base/sizes.h's bytes_iec).
std::string si(double value, const std::string& unit);
std::string seconds(double s);

}  // namespace tb
