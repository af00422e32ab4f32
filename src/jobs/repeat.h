#pragma once
// `trainbench run --repetitions N`: every config measured in N fresh processes, interleaved
// (every config's first process, then every config's second, ...), so that a slow minute of
// a shared machine does not land on one config. The sweep does the same against its store
// (runner/sweep_runner.cc); both combine with record/repetitions.h.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobs/child.h"
#include "jobs/job_spec.h"
#include "spec/config.h"

namespace tb {

// A child's result object, or, when it died before printing one, a result that says how.
nlohmann::json result_of(const ChildOutcome& child, const Config& config);

// Each job's combined result, in order. A job whose process fails runs no more. Stops
// early, returning what it has, when `options.stop` is set. `on_result` sees every process.
std::vector<nlohmann::json> run_repeated(
    const std::vector<JobSpec>& jobs, int repetitions, const ChildOptions& options,
    const std::function<void(size_t job, int repetition, const nlohmann::json& result)>& on_result);

}  // namespace tb
