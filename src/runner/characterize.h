#pragma once
#include <functional>
#include <optional>
#include <string>

#include "platform/description.h"
#include "platform/host.h"

namespace tb {

struct CharacterizeOptions {
  // The small sizes are there for the efficiency curve: the peak comes from the large ones.
  std::vector<int64_t> gemm_sizes = {16, 32, 64, 128, 256, 512, 1024, 2048, 3072};
  // A linear layer's GEMMs at these batches (rows) and n x n weights: the thin products.
  std::vector<int64_t> gemm_rows = {16, 64, 256};
  std::vector<int64_t> gemm_rows_sizes = {64, 128, 512, 2048};
  // 3x3 convolutions at batch 8 on side x side maps and C = K channels, on the run's threads.
  std::vector<int64_t> conv_grid_sides = {2, 4, 8, 16, 32};
  std::vector<int64_t> conv_grid_channels = {8, 16, 32, 64, 128, 256};
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int trials = 5;
  double trial_s = 0.15;
  int fma_units = 0;            // per core; 0: the microarchitecture's, see docs/platforms.md
  bool sweep = true;            // the working-set sweep for cache roofs
  bool overhead = true;         // the per-operator overhead for the description's efficiency
  int64_t stream_elements = 0;  // per array; 0: 4x the last-level cache, as STREAM asks
  // The same GEMM timed at the start, between the parts and at the end (measurements.steadiness).
  bool steadiness = true;
  std::function<void(const std::string&)> progress;  // one line per phase, optional
};

// The largest max/min of the steadiness GEMM's rates a measurement passes without a warning.
// The check is for spells that slow the machine by a quarter for a minute; the GEMM right
// after the one-core convolution curves can run some 10% below the others on a 2-vCPU VM
// (not explained yet), which alone should not ask for a new measurement.
inline constexpr double kSteadinessLimit = 1.20;

// Measures this machine and returns its description: empirical roofs (peak GEMM per
// dtype, STREAM triad, cache bandwidths), the efficiency below them (achieved GEMM
// fraction per size, per-operator overhead), spec roofs (theoretical peaks), the machine's
// facts and every trial, in the registry's format.
PlatformDescription characterize_host(const CharacterizeOptions& options);

// What the cached description of this host depends on: a change in any of these
// (CPU, cores, memory, LibTorch, BLAS, trainbench's measurement method) invalidates it.
nlohmann::json host_fingerprint();

// The cache file of this host: $TRAINBENCH_CACHE_DIR, else $XDG_CACHE_HOME/trainbench,
// else ~/.cache/trainbench; named after the host name.
std::string platform_cache_path();

// The cached description if it exists, parses and matches `fingerprint`; otherwise
// nullopt with the reason in `why` ("no cache", "libtorch changed: 1.13.0 -> 2.1.0", ...).
std::optional<PlatformDescription> load_cached_platform(const std::string& path,
                                                        const nlohmann::json& fingerprint,
                                                        std::string* why);
void save_cached_platform(const std::string& path, const PlatformDescription& p);

}  // namespace tb
