#include "runner/utilization.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

namespace tb {

double compute_utilization(double active_s, double elapsed_s) {
  return elapsed_s > 0 ? std::min(1.0, std::max(0.0, active_s / elapsed_s)) : 0;
}

double fp_utilization(double flops, double peak_flops, double active_s) {
  return peak_flops > 0 && active_s > 0 ? flops / (peak_flops * active_s) : 0;
}

double cpu_utilization(const std::vector<double>& core_active_s, double elapsed_s) {
  if (core_active_s.empty() || elapsed_s <= 0) return 0;
  double sum = 0;
  for (double a : core_active_s) sum += a;
  return sum / (double(core_active_s.size()) * elapsed_s);
}

ThreadSnapshot thread_snapshot() {
  ThreadSnapshot s;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.wall_s = ts.tv_sec + ts.tv_nsec * 1e-9;
  const double tick = 1.0 / double(sysconf(_SC_CLK_TCK));
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return s;
  s.has_schedstat = true;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    const std::string base = std::string("/proc/self/task/") + d->d_name;
    ThreadSnapshot::Thread t{std::stoll(d->d_name), 0, 0};
    // schedstat: nanoseconds on a CPU, nanoseconds waiting on a run queue, time slices.
    std::ifstream sched(base + "/schedstat");
    double run_ns = 0, wait_ns = 0;
    if (sched >> run_ns >> wait_ns) {
      t.cpu_s = run_ns * 1e-9, t.wait_s = wait_ns * 1e-9;
    } else {
      s.has_schedstat = false;
      // stat: after the parenthesised name, utime and stime are fields 14 and 15.
      std::ifstream stat(base + "/stat");
      std::string line;
      std::getline(stat, line);
      std::istringstream f(line.substr(line.rfind(')') + 2));
      std::string field;
      double utime = 0, stime = 0;
      for (int i = 3; i <= 15 && f >> field; ++i) {
        if (i == 14) utime = std::stod(field);
        if (i == 15) stime = std::stod(field);
      }
      t.cpu_s = (utime + stime) * tick;
    }
    s.threads.push_back(t);
  }
  closedir(dir);
  return s;
}

ThreadActivity thread_activity(const ThreadSnapshot& a, const ThreadSnapshot& b) {
  ThreadActivity out;
  out.elapsed_s = b.wall_s - a.wall_s;
  out.threads = int(b.threads.size());
  out.has_schedstat = a.has_schedstat && b.has_schedstat;
  std::map<int64_t, ThreadSnapshot::Thread> before;
  for (const auto& t : a.threads) before[t.tid] = t;
  for (const auto& t : b.threads) {
    const auto it = before.find(t.tid);
    const double cpu = t.cpu_s - (it != before.end() ? it->second.cpu_s : 0);
    const double wait = t.wait_s - (it != before.end() ? it->second.wait_s : 0);
    out.computing_s += cpu;
    out.runnable_wait_s += wait;
    if (out.elapsed_s > 0 && cpu >= 0.01 * out.elapsed_s) {
      ++out.threads_used;
      out.blocked_s += std::max(0.0, out.elapsed_s - cpu - wait);
    }
  }
  return out;
}

}  // namespace tb
