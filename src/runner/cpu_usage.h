#pragma once
#include <cstdint>
#include <vector>

namespace tb {

// A snapshot of CPU time: this process's and every core's, to take the difference of.
struct CpuSnapshot {
  double wall_s = 0;
  double process_cpu_s = 0;  // user + system time of all this process's threads
  std::vector<double> core_active, core_total;  // /proc/stat jiffies per core
};

CpuSnapshot cpu_snapshot();

struct CpuUsage {
  // TBD eq. 3 for this process: CPU time / (cores x elapsed), in [0, 1].
  double process = 0;
  // The same equation over all of the machine's activity, per core and averaged.
  double system = 0;
  std::vector<double> per_core;
};

CpuUsage cpu_usage(const CpuSnapshot& begin, const CpuSnapshot& end);

}  // namespace tb
