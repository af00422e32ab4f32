#pragma once
// What a measured window used of the machine, as results keep it: TBD's utilization
// metrics (Zhu et al., section III-D) and the CPU accounting behind them. The runner measures
// them (runner/utilization.h, runner/cpu_usage.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tb {

struct CpuUsage {
  // TBD eq. 3 for this process: CPU time / (cores x elapsed), in [0, 1].
  double process = 0;
  // The same equation over all of the machine's activity, per core and averaged.
  double system = 0;
  std::vector<double> per_core;
};

// Where this process's threads spent a window of time, from the kernel's per-thread
// accounting (/proc/self/task/*/schedstat, or stat where schedstat is missing).
struct ThreadActivity {
  int threads = 0;       // threads of the process at the end of the window
  int threads_used = 0;  // those that ran for at least 1% of the window
  double elapsed_s = 0;
  double computing_s = 0;      // on a CPU, all threads together
  double runnable_wait_s = 0;  // ready to run but waiting for a core (0 without schedstat)
  // The used threads' remaining time: blocked on a lock, a barrier or I/O, or sleeping.
  double blocked_s = 0;
  bool has_schedstat = false;
  int64_t steps = 0;  // training steps in the window, where the caller counts them
};

// The utilization of one measured window, as reported next to a profile or a run.
struct Utilization {
  std::string device = "cpu";
  double elapsed_s = 0;
  double active_s = 0;               // eq. 1's numerator: time some operator was running
  std::optional<double> compute;     // eq. 1
  std::optional<double> fp;          // eq. 2, needs a peak
  std::optional<double> fp_elapsed;  // FLOPs over peak x elapsed (eq. 2 with idle time counted)
  std::string dtype;
  std::optional<double> peak_flops;
  CpuUsage cpu;  // eq. 3: this process, the whole machine, per core
  ThreadActivity threads;
};

}  // namespace tb
