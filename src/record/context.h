#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "platform/blas.h"
#include "platform/core_latency.h"
#include "platform/host.h"

namespace tb {

inline constexpr int kSchemaVersion = 1;

// Where a result was produced: host, CPU, memory, library versions, trainbench itself.
struct Context {
  HostInfo host;
  BlasInfo blas;
  std::string libtorch_version;
  std::string compiler;
  std::string trainbench_version;
  std::string git_revision;
  bool onednn = false;     // LibTorch built with oneDNN (MKL-DNN)
  int openmp_threads = 0;  // LibTorch's intra-op threads at the time of the snapshot
  bool flush_denormal = false;
  // Thread placement: the CPUs the process (and so every OpenMP and BLAS thread) may run on,
  // and whether the BLAS runs its GEMMs on LibTorch's OpenMP pool or on a pool of its own.
  std::string affinity;
  std::string blas_pool;  // "openmp (shared with LibTorch)", "own pthread pool", "none"
  // One cache line's round trip between the first two of those CPUs, measured with the context:
  // two-thread step times on a VM follow it (docs/stacks.md, "Thread placement").
  std::optional<CoreRoundTrip> core_round_trip;
  std::vector<std::pair<std::string, std::string>> runtime_env;
};

Context current_context();
std::string trainbench_version_string();  // "0.1.0 (git abc123)"

}  // namespace tb
