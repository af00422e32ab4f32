#pragma once
// Throughput and FLOPS utilization against thread (or worker) count, and Amdahl's
// non-parallel fraction fitted from it (ParaDnn section 4.3).
#include <map>
#include <string>
#include <vector>

#include "analysis/runs.h"

namespace tb {

struct ScalingSeries {
  std::string param;  // threads or workers
  std::string key;    // the config with the scaled parameter as '*', plus platform and stack
  std::string family, platform, stack;
  std::map<int, double> throughput;   // examples/s by count
  std::map<int, double> utilization;  // FLOPS utilization by count, where known
  std::map<int, std::string> configs;
  std::map<int, double> comm_share;  // data-parallel runs: exposed communication / step
  // NaN unless a count of 1 was measured and the law fits: a series that slows down as it
  // grows (a fit above 1) or speeds up faster than linearly (below 0) gets `amdahl_note`
  // instead, which says so.
  double serial_fraction = std::nan("");
  std::string amdahl_note;
};

// One series per experiment measured at two or more counts of `param` (threads, workers).
std::vector<ScalingSeries> scaling(const RunSet& runs, const std::string& param = "threads");

}  // namespace tb
