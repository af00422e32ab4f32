#pragma once
// The one table of a run's metrics. Each row says where the metric sits in a result's JSON,
// how it is computed from a RunResult, whether the results store keeps it as a column (and
// of which SQL type), and whether `analyze`/`report` may chart it. The JSON writer
// (record/json.cc), the store's run table (store/store.cc) and the analyses' metric list
// (analysis/runs.h) are all produced from it: a new metric is one row here plus, when it is
// measured, its field in RunResult.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "record/result.h"

namespace tb {

struct Metric {
  // The store's column and the name `--metric` takes; empty: the metric is in the JSON only.
  std::string column;
  std::string sql_type;  // REAL, INTEGER or TEXT; with a column
  // Where it sits in a result object, e.g. {"timing", "mean_s"}.
  std::vector<std::string> path;
  // Its value for a run that finished ok. Empty for a metric written by a block of its own
  // (cost, roofline, distributed, repetitions: record/json.cc, runner/distributed.cc,
  // record/repetitions.cc); the store and the analyses still read it at `path`.
  std::function<nlohmann::json(const RunResult&)> value;
  // Offered to analyses (`--metric`) when it has a label.
  std::string label, unit;
  bool higher_is_better = true;
  // A speed (a rate, or a time whose inverse is one): what a speedup can be taken of. Sizes,
  // counts and spreads (params, flops_per_step, step_cv) are not, whatever way they sort.
  bool directed = true;

  bool stored() const { return !column.empty(); }
  bool numeric() const { return sql_type == "REAL" || sql_type == "INTEGER"; }
  bool analysable() const { return stored() && !label.empty(); }
};

const std::vector<Metric>& metric_table();

// The value at `path` in a JSON object; nullptr when absent or null.
const nlohmann::json* json_at(const nlohmann::json& j, const std::vector<std::string>& path);
// The metric's value in a result object (json_at its path).
const nlohmann::json* metric_value(const nlohmann::json& result, const Metric& m);

}  // namespace tb
