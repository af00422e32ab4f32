#pragma once
// One config measured in N independent processes (`run --repetitions N`, `sweep`): what a
// single process cannot see. Within a process the CI of the mean step time says how well
// that process's mean is known; between processes the same config can land on another
// memory layout, thread placement or BLAS code path and settle elsewhere (two modes).
// Google Benchmark's repetitions are the model: per-repetition values kept, aggregates
// (mean, median, stddev, cv) beside them.
#include <nlohmann/json.hpp>
#include <vector>

namespace tb {

// Spread between processes above which disagreeing repetitions mark a result unstable:
// the same 5% the reproducibility benchmark (bench/reproducibility.sh) holds configs to.
inline constexpr double kUnstableSpread = 0.05;

// Whether per-process means disagree beyond their own 95% CIs (half-widths) and by more
// than kUnstableSpread: the fastest and the slowest process's intervals do not overlap.
bool repetitions_disagree(const std::vector<double>& means, const std::vector<double>& half_widths);

// What one process measured, as kept in a result's "repetitions.runs": its own timing
// block, step times and CPU utilization, and when it ran.
nlohmann::json repetition_entry(const nlohmann::json& result);

// The combined result of `entries` (repetition_entry of every process, N >= 1), on the
// template of `latest` (a full ok result of the same config: cost, config, stack).
// timing.mean_s becomes the median of the per-process means (the headline), and the
// throughput metrics follow it; the rest of "timing" and the step times describe the
// process whose mean is the median (the lower of the two middle ones for an even N).
// Adds "repetitions" (count, between_processes aggregates, runs) and "unstable".
nlohmann::json combine_repetitions(const nlohmann::json& latest,
                                   const std::vector<nlohmann::json>& entries);

// The result after one more process: `previous` is null or the result so far (one process's,
// or combined), `next` the new process's. A failed process's result wins, keeping the
// repetitions that did run under "repetitions.runs"; a failed `previous` stays as it is.
nlohmann::json add_repetition(const nlohmann::json& previous, const nlohmann::json& next);
// Processes a result rests on: 0 for a failure, 1 for a single run.
int repetition_count(const nlohmann::json& result);

// The "repetitions" block and "unstable" flag of a single-process result: the spread
// between processes was not measured.
void mark_single_process(nlohmann::json& result);

}  // namespace tb
