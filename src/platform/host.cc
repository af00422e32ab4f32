#include "platform/host.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
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

}  // namespace

int online_cpus() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
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
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = value;
    if (key == "flags" && h.simd.empty()) {
      std::istringstream flags(value);
      std::string f;
      while (flags >> f) {
        for (const char* want : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                 "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile",
                                 "amx_bf16", "amx_int8", "asimd", "sve"})
          if (f == want) h.simd.push_back(f);
      }
    }
  }
  return h;
}

}  // namespace tb
