#pragma once
// A platform's roofs (measured and specified, caches where measured) and the runs placed
// under them (ParaDnn section 4.2).
#include <optional>
#include <string>
#include <vector>

#include "analysis/runs.h"

namespace tb {

struct Roof {
  std::string label;   // "fp32 peak (measured)", "DRAM (measured)", "L2 (measured)", ...
  std::string kind;    // "compute" (FLOP/s) or "memory" (bytes/s)
  std::string source;  // "measured" or "spec"
  std::string dtype;   // compute roofs only
  double value = 0;
};

struct RooflineView {
  std::string platform;
  std::vector<Roof> roofs;
  // Ridge points of the main-memory roof against each dtype's measured compute roof.
  std::vector<std::pair<std::string, double>> ridges;  // dtype, FLOPs/byte
  std::vector<const Run*> runs;                        // ok runs with intensity and achieved FLOP/s
  // Operators of the platform's profiles with FLOPs, bytes and time (op-level roofline).
  std::vector<std::pair<const Profile*, const OpStats*>> ops;
};

// One view per platform that has a description; platforms without one are skipped.
std::vector<RooflineView> rooflines(const RunSet& runs);

}  // namespace tb
