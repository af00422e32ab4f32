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
  int runs = 0;           // aggregated map: runs of this cell with a value (the median's n)
};

// How a cell gets its value when other hyperparameters vary too. `slice`: every other
// hyperparameter held at one combination (ParaDnn Fig. 2); `median`: the median over every run
// of the cell, whatever the others are; `auto`: the slice when the runs form a full grid (every
// combination of their hyperparameters' values, as a sweep or a filtered sweep runs them),
// the median when they do not (a sampled sweep, where no slice is covered).
enum class HeatCells { slice, median, automatic };

struct HeatMap {
  std::string x, y;                          // the two axes
  std::map<std::string, std::string> fixed;  // every other hyperparameter's value
  std::vector<double> xs, ys;                // every value the axes take in the input
  std::vector<HeatCell> cells;               // xs.size() * ys.size(), x fastest
  bool aggregated = false;  // cells are medians over the other hyperparameters; `fixed` holds
                            // only what --fix named
};

// Builds the map from points of one family. Parameters named in `fix` are held at the
// given values; in a slice, any other parameter that still varies is held at the value
// combination with the most successful runs (ties: most runs, then the first in order).
// Throws UsageError when an axis is not a numeric parameter of the points or a fixed value
// selects nothing.
HeatMap heat_map(const std::vector<Point>& points, const std::string& x, const std::string& y,
                 const std::map<std::string, std::string>& fix = {},
                 HeatCells mode = HeatCells::automatic);

}  // namespace tb
