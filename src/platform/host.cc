#include "platform/host.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

namespace tb {
namespace {

int64_t meminfo_kb(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string k;
  int64_t v;
  std::string unit;
  while (in >> k >> v >> unit)
    if (k == key + ":") return v;
  return 0;
}

int64_t parse_size(const std::string& s) {  // "48K", "2048K", "480M"
  if (s.empty()) return 0;
  int64_t v = std::stoll(s);
  switch (s.back()) {
    case 'K':
      return v << 10;
    case 'M':
      return v << 20;
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Caches from sysfs: one entry per (level, type), counting distinct sharing groups.
std::vector<CacheLevel> read_caches(int cpus) {
  std::vector<CacheLevel> out;
  for (int index = 0;; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = read_line(dir + "/level");
    if (level.empty()) break;
    CacheLevel c;
    c.level = std::stoi(level);
    c.type = read_line(dir + "/type");
    c.size_bytes = parse_size(read_line(dir + "/size"));
    std::set<std::string> groups;
    for (int cpu = 0; cpu < cpus; ++cpu)
      groups.insert(read_line("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index" +
                              std::to_string(index) + "/shared_cpu_list"));
    c.instances = int(groups.size());
    out.push_back(c);
  }
  return out;
}

}  // namespace

int64_t last_level_cache_bytes(const HostInfo& h) {
  int64_t best = 0;
  int level = 0;
  for (const auto& c : h.caches)
    if (c.type != "Instruction" && c.level >= level)
      level = c.level, best = c.size_bytes * std::max(1, c.instances);
  return best;
}

int online_cpus() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

std::string cpu_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    out +=
        (out.empty() ? "" : ",") + std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end;
  }
  return out;
}

int64_t available_memory_bytes() { return meminfo_kb("MemAvailable") * 1024; }

HostInfo host_info() {
  HostInfo h;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  h.hostname = name;
  utsname u{};
  if (uname(&u) == 0) h.os = std::string(u.sysname) + " " + u.release;
  h.logical_cpus = online_cpus();
  h.mem_total = meminfo_kb("MemTotal") * 1024;
  h.mem_available = meminfo_kb("MemAvailable") * 1024;
  h.caches = read_caches(h.logical_cpus);
  std::set<std::string> packages, cores;
  std::string package;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = value;
    if (key == "vendor_id" && h.vendor.empty()) h.vendor = value;
    if (key == "cpu family" && h.cpu_family < 0) h.cpu_family = std::atoi(value.c_str());
    if (key == "model" && h.cpu_model_number < 0) h.cpu_model_number = std::atoi(value.c_str());
    if (key == "cpu MHz" && h.mhz == 0) h.mhz = std::atof(value.c_str()), h.mhz_source = "cpuinfo";
    if (key == "physical id") package = value, packages.insert(value);
    if (key == "core id") cores.insert(package + "/" + value);
    if (key == "flags" && h.simd.empty()) {
      std::istringstream flags(value);
      std::string f;
      while (flags >> f) {
        if (f == "hypervisor") h.virtualized = true;
        for (const char* want :
             {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16",
              "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve"})
          if (f == want) h.simd.push_back(f);
      }
    }
  }
  // The current clock varies with load; the base (or maximum) frequency does not.
  for (const char* f : {"base_frequency", "cpuinfo_max_freq"}) {
    const std::string khz = read_line(std::string("/sys/devices/system/cpu/cpu0/cpufreq/") + f);
    if (!khz.empty() && std::atof(khz.c_str()) > 0) {
      h.mhz = std::atof(khz.c_str()) / 1000, h.mhz_source = f;
      break;
    }
  }
  const std::string max_khz = read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (!max_khz.empty()) h.max_mhz = std::atof(max_khz.c_str()) / 1000;
  h.sockets = std::max<int>(1, int(packages.size()));
  h.physical_cores = cores.empty() ? h.logical_cpus : int(cores.size());
  return h;
}

std::string utc_now_iso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace tb
