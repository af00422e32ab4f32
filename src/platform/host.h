#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

// What this machine is, read from the OS; cheap enough to call for every result.
struct CacheLevel {
  int level = 0;
  std::string type;        // Data, Instruction, Unified
  int64_t size_bytes = 0;  // of one instance
  int instances = 0;       // how many of them the online CPUs share out
};

struct HostInfo {
  std::string hostname;
  std::string os;  // kernel name and release
  std::string cpu_model;
  int logical_cpus = 0;  // online logical CPUs
  int physical_cores = 0;
  int sockets = 0;
  double mhz = 0;  // cpufreq's base (or max) frequency; else what /proc/cpuinfo says
  std::string mhz_source;
  double max_mhz = 0;   // cpufreq's cpuinfo_max_freq (the highest turbo clock); 0 unread
  std::string vendor;   // cpuinfo's vendor_id: GenuineIntel, AuthenticAMD, ...
  int cpu_family = -1;  // cpuinfo's "cpu family" and "model": the microarchitecture
  int cpu_model_number = -1;
  bool virtualized = false;  // the "hypervisor" CPU flag
  std::vector<CacheLevel> caches;
  int64_t mem_total = 0;  // bytes
  int64_t mem_available = 0;
  std::vector<std::string> simd;  // the SIMD/matrix extensions among the CPU flags
};

HostInfo host_info();
// Total bytes of the largest cache level (all instances), 0 if unknown.
int64_t last_level_cache_bytes(const HostInfo& h);
int64_t available_memory_bytes();
int online_cpus();
// The CPUs this process may run on (sched_getaffinity), as a list such as "0-1" or "0,2-5";
// every thread it starts inherits it unless OMP_PLACES/OMP_PROC_BIND pin them further.
std::string cpu_affinity();
// The host's clock now, ISO 8601 UTC to the second: how every stored time is written.
std::string utc_now_iso();

}  // namespace tb
