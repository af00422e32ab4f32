#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

// What this machine is, read from the OS; cheap enough to call for every result.
struct HostInfo {
  std::string hostname;
  std::string os;         // kernel name and release
  std::string cpu_model;
  int logical_cpus = 0;   // online logical CPUs
  int64_t mem_total = 0;  // bytes
  int64_t mem_available = 0;
  std::vector<std::string> simd;  // the SIMD/matrix extensions among the CPU flags
};

HostInfo host_info();
int64_t available_memory_bytes();
int online_cpus();

}  // namespace tb
