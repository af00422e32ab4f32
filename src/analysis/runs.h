#pragma once
// The runs of one or more results stores, loaded once into plain rows that every
// analysis reads: hyperparameters as text and (where numeric) as numbers, metrics by name.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "platform/description.h"
#include "record/profile.h"

namespace tb {

struct Run {
  std::string config, family, status, error;
  std::string platform;    // the platform row's name
  std::string stack;       // a short label of the software stack (see stack_label)
  std::string store;       // the file it came from
  std::string end_reason;  // why sampling stopped: converged, budget, ...
  // When it was measured, UTC ("2026-11-27T22:38:01Z"; the first repetition's start and the
  // last one's end); empty in stores that lack them.
  std::string started_at, finished_at;
  std::string throughput_unit = "examples";   // of units_per_s: images, tokens, audio_s, frames
  std::map<std::string, std::string> params;  // from the config text
  std::map<std::string, double> metrics;      // the store's numeric metric columns present
  bool ok() const { return status == "ok"; }
  // Its repetitions in fresh processes disagree beyond their own CIs (record/repetitions.h).
  bool unstable() const { return metric("unstable") == 1; }
  // Processes the measurement rests on; 1 for stores from before repetitions.
  int repetitions() const;
  // NaN when the run has no such metric.
  double metric(const std::string& name) const;
  // Throughput in the run's own unit; examples/s for stores from before units existed.
  double throughput() const;
  // The parameter as a number, when it is one.
  std::optional<double> number(const std::string& param) const;
};

struct PlatformInfo {
  std::string name;
  std::optional<PlatformDescription> description;  // when the store holds one
  std::string problem;                             // why a stored description could not be read
};

// A per-operator profile (`trainbench profile --store`, `sweep --profile`) and where it ran.
struct ProfileRow {
  std::string platform;
  Profile profile;
};
// A measured memory breakdown (`trainbench memory --store`): the stored JSON.
struct MemoryRow {
  std::string platform;
  nlohmann::json breakdown;
};

struct RunSet {
  std::vector<Run> runs;
  std::vector<ProfileRow> profiles;
  std::vector<MemoryRow> memory;
  std::vector<PlatformInfo> platforms;  // in order of first appearance
  std::vector<std::string> stores;
  std::vector<std::string> families() const;  // sorted
  std::vector<const Run*> of_family(const std::string& family, bool ok_only) const;
};

// The runs of one family (`--family` of analyze and compare), with its profiles and memory
// breakdowns: the others dropped, so that no view silently reports on runs the user excluded.
// Throws UsageError naming the family where no run has it. An empty family keeps every run.
RunSet only_family(RunSet runs, const std::string& family);

// Whether a family is one of the reference models (TBD / ParaDnn real-model suite) as this
// binary knows them; a family it does not know (another build's) counts as generated.
bool is_reference_family(const std::string& family);
// The runs of reference models, in the order loaded.
std::vector<const Run*> reference_runs(const RunSet& runs, bool ok_only);

// Reads every store read-only. Throws UsageError for a missing or foreign file.
RunSet load_runs(const std::vector<std::string>& store_paths);

// Splits `family:k=v,...` without validating against the family schema, so stores
// written by other trainbench versions still load.
std::map<std::string, std::string> config_params(const std::string& config,
                                                 std::string* family = nullptr);

// The metrics an analysis may ask for, with whether larger is better: the rows of
// record/metrics.h that carry a label.
struct MetricInfo {
  std::string name, label, unit;
  bool higher_is_better = true;
  bool directed = true;  // a speed: record/metrics.h
};
const std::vector<MetricInfo>& metric_infos();
const MetricInfo& metric_info(const std::string& name);  // UsageError naming the metric

// The runs as chart points carrying `metric` (ok runs with the metric have a value).
std::vector<Point> points_of(const std::vector<const Run*>& runs, const std::string& metric);

// Hyperparameters of a family that are numeric and take more than one value among the
// given runs: the regression's inputs and the heat map's candidate axes.
std::vector<std::string> varying_numeric_params(const std::vector<const Run*>& runs);

}  // namespace tb
