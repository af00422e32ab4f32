#pragma once
// A metric over two hyperparameters with the others fixed (ParaDnn Fig. 2).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/analysis.h"

namespace tb {

struct HeatCell {
  double x = 0, y = 0;
  std::string config;  // empty when the grid point was never run
  std::string status;  // ok, oom-predicted, ..., or "not-run"
  std::string error;
  std::optional<double> value;
  bool unstable = false;  // the value rests on a run whose repetitions disagree
};

struct HeatMap {
  std::string x, y;                          // the two axes
  std::map<std::string, std::string> fixed;  // every other hyperparameter's value
  std::vector<double> xs, ys;                // every value the axes take in the input
  std::vector<HeatCell> cells;               // xs.size() * ys.size(), x fastest
};

// Builds the map from points of one family. Parameters named in `fix` are held at the
// given values; any other parameter that still varies is held at the value combination
// with the most successful runs (ties: most runs, then the first in order). Throws
// UsageError when an axis is not a numeric parameter of the points or a fixed value
// selects nothing.
HeatMap heat_map(const std::vector<Point>& points, const std::string& x, const std::string& y,
                 const std::map<std::string, std::string>& fix = {});

}  // namespace tb
