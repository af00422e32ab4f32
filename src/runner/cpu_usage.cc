#include "runner/cpu_usage.h"

#include <sys/resource.h>
#include <time.h>

#include <fstream>
#include <sstream>
#include <string>

#include "platform/host.h"

namespace tb {

CpuSnapshot cpu_snapshot() {
  CpuSnapshot s;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.wall_s = ts.tv_sec + ts.tv_nsec * 1e-9;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  s.process_cpu_s = ts.tv_sec + ts.tv_nsec * 1e-9;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !isdigit(line[3])) continue;
    std::istringstream f(line);
    std::string name;
    double user, nice, system, idle, iowait, irq, softirq, steal = 0;
    f >> name >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const double active = user + nice + system + irq + softirq + steal;
    s.core_active.push_back(active);
    s.core_total.push_back(active + idle + iowait);
  }
  return s;
}

CpuUsage cpu_usage(const CpuSnapshot& a, const CpuSnapshot& b) {
  CpuUsage u;
  const double wall = b.wall_s - a.wall_s;
  const int cores = online_cpus();
  if (wall > 0) u.process = (b.process_cpu_s - a.process_cpu_s) / (cores * wall);
  double active = 0, total = 0;
  for (size_t i = 0; i < a.core_active.size() && i < b.core_active.size(); ++i) {
    const double da = b.core_active[i] - a.core_active[i], dt = b.core_total[i] - a.core_total[i];
    u.per_core.push_back(dt > 0 ? da / dt : 0);
    active += da, total += dt;
  }
  u.system = total > 0 ? active / total : 0;
  return u;
}

}  // namespace tb
