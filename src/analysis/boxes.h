#pragma once
// Box plots of a metric per family, split by cell or block type where the family has one
// (ParaDnn Figs. 4 and 6).
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/runs.h"

namespace tb {

struct BoxGroup {
  std::string group;  // "fc", "cnn block=residual", "rnn cell=lstm"
  BoxStats stats;
  std::vector<const Run*> outlier_runs;  // the runs behind stats.outliers
};

// The parameter a family is split by for box plots, or "" (cell for rnn, block for cnn).
std::string box_split_param(const std::vector<const Run*>& runs);
// `by`: split every family's box by this hyperparameter instead (its runs without it stay
// whole); `family`: only that family's runs ("" all).
std::vector<BoxGroup> box_groups(const RunSet& runs, const std::string& metric,
                                 const std::string& by = "", const std::string& family = "");
// Box statistics of arbitrary points' values grouped by family (e.g. speedups).
std::vector<BoxGroup> box_groups(const std::vector<Point>& points);

}  // namespace tb
