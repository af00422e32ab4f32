// The machine's own reproducibility floor: a fixed piece of plain C++ work (no LibTorch, no
// BLAS, no OpenMP) timed like a training step, so that its spread between fresh processes is
// what the machine contributes to trainbench's. A step is one chunk of work per thread, and the
// step ends when the slowest thread is done (as an OpenMP parallel region does), so a slow core
// slows the whole step. Four kinds of work: `scalar`, a chain of dependent floating-point
// operations (core speed); `stream`, a sum over an array four times larger than a last-level
// cache slice (memory bandwidth); `cache`, the same sum over an array twice the size of a core's
// L2, which lives in the shared last-level cache (what a small training step's weights and
// activations do between layers, and what a neighbour on the same cache evicts); `simd`,
// independent fused multiply-adds on the widest vectors the CPU has (what a GEMM's inner loop
// asks of a core: the vector units, their clock, and on a VM the physical core a sibling vCPU or
// another guest may share). A neighbour can slow one of these and leave the others alone, so
// they are measured apart.
//
//   machine_floor [--threads N] [--seconds S] [--work scalar|stream|cache|simd]
// prints one JSON line: mean, median, min and max step time over S seconds of steps.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// A step's worth of work sized to about 0.5 ms on a current core: long enough that the clock
// reads do not matter, short enough that a one-second slow spell covers many steps.
double scalar_work(double seed) {
  double x = seed;
  for (int i = 0; i < 400000; ++i) x = x * 0.999999 + 1e-9;
  return x;
}

// 12 independent accumulators: enough to cover the fused multiply-add's latency on two ports.
// About 0.5 ms a step on a core with two 512-bit FMA units, about 1 ms with one; max/min does
// not depend on the size. Threads are not pinned (as LibTorch's are not): two landing on one
// core's SMT siblings share its FMA units, which is part of what this floor measures.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) double simd_work_avx512(double seed) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(float(seed) + float(j));
  for (int i = 0; i < 250000; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], m, c);
  __m512 t = a[0];
  for (int j = 1; j < 12; ++j) t = _mm512_add_ps(t, a[j]);
  float lanes[16];
  _mm512_storeu_ps(lanes, t);
  double s = 0;
  for (float v : lanes) s += double(v);
  return s;
}

__attribute__((target("avx2,fma"))) double simd_work_avx2(double seed) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(float(seed) + float(j));
  for (int i = 0; i < 250000; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], m, c);
  __m256 t = a[0];
  for (int j = 1; j < 12; ++j) t = _mm256_add_ps(t, a[j]);
  float lanes[8];
  _mm256_storeu_ps(lanes, t);
  double s = 0;
  for (float v : lanes) s += double(v);
  return s;
}
#endif

double simd_work_generic(double seed) {
  float a[12];
  for (int j = 0; j < 12; ++j) a[j] = float(seed) + float(j);
  for (int i = 0; i < 400000; ++i)
    for (int j = 0; j < 12; ++j) a[j] = a[j] * 0.999999f + 1e-7f;
  double s = 0;
  for (float v : a) s += double(v);
  return s;
}

using WorkFn = double (*)(double);

// Detected, not assumed: these machines vary between AVX-512 and AVX2 from session to session.
WorkFn simd_work(const char** isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return *isa = "avx512f", simd_work_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return *isa = "avx2", simd_work_avx2;
#endif
  *isa = "generic";
  return simd_work_generic;
}

// Eight independent sums: one running sum waits ~4 cycles per element on the add's latency,
// which no cache level is slow enough to show; eight keep the loads the bottleneck.
double stream_work(const std::vector<double>& a) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const size_t n = a.size() / 8 * 8;
  for (size_t i = 0; i < n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + size_t(j)];
  for (size_t i = n; i < a.size(); ++i) s[0] += a[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Bytes per thread for `cache`: twice a core's L2, so the array leaves L2 and stays in the
// shared cache; less where the last-level cache, shared by the threads, would not hold twice
// their arrays. sysconf reports 0 or -1 where it does not know; on some VMs the L3 figure is
// the whole package's, which leaves 2 x L2 as it is.
size_t cache_bytes(int threads) {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t bytes = l2 > 0 ? 2 * size_t(l2) : size_t(2) << 20;
  if (l3 > 0 && size_t(l3) / size_t(threads) < 2 * bytes) bytes = size_t(l3) / size_t(threads) / 2;
  return std::max<size_t>(bytes, 64 << 10);
}

int usage(const char* bad) {
  std::fprintf(
      stderr,
      "machine_floor: bad argument '%s'\n"
      "usage: machine_floor [--threads N] [--seconds S] [--work scalar|stream|cache|simd]\n",
      bad);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 1.5;
  std::string work = "scalar";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(argv[i]);
    if (a == "--threads") {
      threads = std::atoi(argv[++i]);
      if (threads < 1 || threads > 256) return usage(argv[i]);
    } else if (a == "--seconds") {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0 && seconds < 3600)) return usage(argv[i]);
    } else if (a == "--work") {
      work = argv[++i];
      if (work != "scalar" && work != "stream" && work != "cache" && work != "simd")
        return usage(argv[i]);
    } else {
      return usage(argv[i]);
    }
  }
  const char* isa = "";
  const WorkFn simd = work == "simd" ? simd_work(&isa) : nullptr;
  // stream: 16 MiB per thread, larger than a core's share of the last-level cache on these
  // machines. cache: a fixed number of passes over the smaller array, so that a step is about as
  // long as the other kinds' (~0.5-2 ms) whatever the array's size.
  const size_t doubles = work == "stream"  ? size_t(2) << 20
                         : work == "cache" ? cache_bytes(threads) / sizeof(double)
                                           : 0;
  const int passes = work == "cache" ? int(std::max<size_t>(1, (size_t(4) << 20) / doubles)) : 1;
  std::vector<std::vector<double>> arrays(doubles ? threads : 0, std::vector<double>(doubles, 1.0));
  const auto one = [&](int t, double seed) {
    if (work == "scalar") return scalar_work(seed);
    if (simd) return simd(seed);
    double s = 0;
    for (int p = 0; p < passes; ++p) {
      s += stream_work(arrays[size_t(t)]);
      // The passes sum the same array: the barrier keeps the compiler from summing it once.
      asm volatile("" ::: "memory");
    }
    return s;
  };
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::atomic<long> generation{0};
  std::vector<double> sink(threads, 0);
  // Workers spin between steps, as OpenMP's threads do under GOMP_SPINCOUNT, so that waking
  // them costs no more than it costs LibTorch's pool.
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      long seen = 0;
      while (true) {
        long g;
        while ((g = generation.load(std::memory_order_acquire)) == seen)
          if (stop.load(std::memory_order_relaxed)) return;
        seen = g;
        sink[t] += one(t, double(g));
        done.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  std::vector<double> steps;
  const auto t_start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t_start).count() < seconds) {
    const auto t0 = Clock::now();
    done.store(0, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_acq_rel);
    sink[0] += one(0, double(steps.size()));
    while (done.load(std::memory_order_acquire) < threads - 1) {
    }
    steps.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  stop = true;
  for (auto& th : pool) th.join();
  // The first steps pay for page faults and frequency ramp-up: drop a tenth, as a warm-up.
  const size_t skip = steps.size() / 10;
  std::vector<double> kept(steps.begin() + long(skip), steps.end());
  double sum = 0;
  for (double s : kept) sum += s;
  std::vector<double> sorted = kept;
  std::sort(sorted.begin(), sorted.end());
  double checksum = 0;
  for (double s : sink) checksum += s;
  std::printf(
      "{\"work\": \"%s\", \"isa\": \"%s\", \"bytes_per_thread\": %zu, \"threads\": %d, "
      "\"seconds\": %g, \"steps\": %zu, "
      "\"mean_s\": %.9g, "
      "\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"checksum\": %g}\n",
      work.c_str(), isa, doubles * sizeof(double), threads, seconds, kept.size(),
      sum / double(kept.size()), sorted[sorted.size() / 2], sorted.front(), sorted.back(),
      checksum);
  return 0;
}
