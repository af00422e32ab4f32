#pragma once
// The utilization metrics of TBD (Zhu et al., section III-D), defined once. The CPU
// fills them from its own measurements today; a GPU backend fills eq. 1 and 2 from its
// kernel profiler with the same functions.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "record/utilization.h"
#include "runner/cpu_usage.h"

namespace tb {

// TBD eq. 1: the fraction of the elapsed time the device is busy, i.e. at least one of its
// units is executing an operator (a kernel on a GPU). In [0, 1].
double compute_utilization(double active_s, double elapsed_s);

// TBD eq. 2: the FLOPs executed while the device is active over what its peak could have
// executed in that time. Named for FP32 in the paper; here for the config's dtype.
double fp_utilization(double flops, double peak_flops, double active_s);

// TBD eq. 3: the sum over cores of each core's active time over cores x elapsed time.
double cpu_utilization(const std::vector<double>& core_active_s, double elapsed_s);

// The shortest window whose CPU accounting means something: /proc/stat counts in ticks of
// 1/CLK_TCK (10 ms), so a window of a few short steps reads as 0% and 0 threads.
inline constexpr double kMinAccountingWindowS = 0.25;

struct ThreadSnapshot {
  double wall_s = 0;
  struct Thread {
    int64_t tid;
    double cpu_s, wait_s;
  };
  std::vector<Thread> threads;
  bool has_schedstat = false;
};
ThreadSnapshot thread_snapshot();
ThreadActivity thread_activity(const ThreadSnapshot& begin, const ThreadSnapshot& end);

}  // namespace tb
