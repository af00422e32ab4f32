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
// The headline is the median process's: the one whose mean is the median of the per-process
// means (the lower of the two middle ones for an even N). Its timing block and step times
// become the result's, and the throughput metrics follow its mean.
// Adds "repetitions" (count, between_processes aggregates, runs) and "unstable".
nlohmann::json combine_repetitions(const nlohmann::json& latest,
                                   const std::vector<nlohmann::json>& entries);

// The result after one more process: `previous` is null or the result so far (one process's,
// or combined), `next` the new process's. A failed process's result wins, keeping the
// repetitions that did run under "repetitions.runs"; a failed `previous` stays as it is.
nlohmann::json add_repetition(const nlohmann::json& previous, const nlohmann::json& next);
// Processes a result rests on: 0 for a failure, 1 for a single run.
int repetition_count(const nlohmann::json& result);

// A sweep's repetitions round by round. Round k is every config's k-th process (an index, not
// a time: a resumed sweep's rounds mix invocations). Each process's mean is taken over its
// config's median, and a round's shift is the median of that over the configs. A shared
// machine's slow minutes move every config of a round together, where a config's own
// instability moves it alone: the shifts help tell which one a spread was.
struct RoundShift {
  int round = 0;       // 1-based
  size_t configs = 0;  // the ok results with a process in every round
  double median = 1;   // of the configs' process mean / their median
  double min = 1, max = 1;
};
struct RoundDrift {
  std::vector<RoundShift> rounds;  // empty without two configs with `rounds` processes each
  size_t unstable = 0;             // of those configs, the ones flagged unstable
  // Of those, the ones whose processes agree (repetitions_disagree is false) once every
  // process's mean and CI are divided by its round's shift over the other configs.
  size_t unstable_within_drift = 0;
};
// Over the results with at least `rounds` processes, their first `rounds` of them.
RoundDrift round_drift(const std::vector<nlohmann::json>& results, int rounds);

// The "repetitions" block and "unstable" flag of a single-process result: the spread
// between processes was not measured.
void mark_single_process(nlohmann::json& result);

}  // namespace tb
