#pragma once
#include <cstdint>
#include <vector>

#include "record/utilization.h"

namespace tb {

// A snapshot of CPU time: this process's and every core's, to take the difference of.
struct CpuSnapshot {
  double wall_s = 0;
  double process_cpu_s = 0;                     // user + system time of all this process's threads
  std::vector<double> core_active, core_total;  // /proc/stat jiffies per core
};

CpuSnapshot cpu_snapshot();

CpuUsage cpu_usage(const CpuSnapshot& begin, const CpuSnapshot& end);

}  // namespace tb
