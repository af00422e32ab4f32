#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "platform/host.h"

namespace tb {

// One quantity measured several times: every trial kept, best and median derived.
struct Trials {
  std::vector<double> values;
  double best() const;  // the largest (rates) value
  double median() const;
};

struct GemmSize {
  int64_t n = 0;  // square n x n x n
  Trials gflops;
};
struct GemmMeasurement {
  std::string dtype;
  std::vector<GemmSize> sizes;
  int64_t best_n = 0;
  double best_gflops = 0;
};

// LibTorch's own matrix product (torch::mm) on square matrices of each size: warm-up
// calls excluded, then `trials` timed windows of at least `trial_s` seconds each.
GemmMeasurement measure_gemm(const std::string& dtype, const std::vector<int64_t>& sizes,
                             int trials, double trial_s);

struct StreamMeasurement {
  int64_t elements = 0;  // per array, doubles
  Trials copy, scale, add, triad;  // GB/s, STREAM's byte counting
  bool validated = false;
  std::string validation;
};

// STREAM (McCalpin) copy, scale, add and triad on three double arrays of `elements`
// each, multi-threaded with LibTorch's thread pool, results checked as STREAM does.
StreamMeasurement measure_stream(int64_t elements, int trials);

struct WorkingSetPoint {
  int64_t bytes = 0;  // total working set over all threads
  Trials gbps;
};

// ERT-style sweep: each thread repeatedly updates its own share of a working set
// (x = x * a + b: 16 bytes moved per element), from L1-sized to beyond the last level.
std::vector<WorkingSetPoint> measure_working_sets(int64_t min_bytes, int64_t max_bytes,
                                                  int trials, double trial_s);

// Bandwidth per cache level from a sweep: the median rate over working sets that fit
// in half that level (all instances) and not in the level below.
std::vector<std::pair<std::string, double>> cache_bandwidths(
    const HostInfo& host, const std::vector<WorkingSetPoint>& sweep);

struct TheoreticalPeak {
  std::string dtype;
  double flops = 0;
  std::string formula;
};
// cores x frequency x FMA units x SIMD lanes x 2 (and AMX's 1024 bf16 FLOPs per cycle
// per core where the CPU has it). `fma_units` per core cannot be read from the CPU.
std::vector<TheoreticalPeak> theoretical_peaks(const HostInfo& host, int fma_units);

}  // namespace tb
