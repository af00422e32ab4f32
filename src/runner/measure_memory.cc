#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "platform/microarchitecture.h"
#include "runner/measure.h"

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double timed(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Splits [0, n) into one contiguous chunk per thread, as STREAM's static OpenMP loops do.
template <typename F>
void for_chunks(int64_t n, F&& f) {
  const int64_t threads = at::get_num_threads();
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) f(n * t / threads, n * (t + 1) / threads);
  });
}

// The kernels are compiled for each SIMD level and picked at load time: the library is
// built for generic x86-64, and SSE2 code would understate what the caches deliver.
#if defined(__x86_64__) && defined(__GNUC__)
#define TB_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TB_SIMD_CLONES
#endif

TB_SIMD_CLONES void copy_kernel(double* c, const double* a, int64_t lo, int64_t hi) {
  for (int64_t j = lo; j < hi; ++j) c[j] = a[j];
}
TB_SIMD_CLONES void scale_kernel(double* b, const double* c, double s, int64_t lo, int64_t hi) {
  for (int64_t j = lo; j < hi; ++j) b[j] = s * c[j];
}
TB_SIMD_CLONES void add_kernel(double* c, const double* a, const double* b, int64_t lo,
                               int64_t hi) {
  for (int64_t j = lo; j < hi; ++j) c[j] = a[j] + b[j];
}
TB_SIMD_CLONES void triad_kernel(double* a, const double* b, const double* c, double s, int64_t lo,
                                 int64_t hi) {
  for (int64_t j = lo; j < hi; ++j) a[j] = b[j] + s * c[j];
}
TB_SIMD_CLONES void update_kernel(double* p, int64_t len, int64_t reps) {
  for (int64_t r = 0; r < reps; ++r) {
    for (int64_t j = 0; j < len; ++j) p[j] = p[j] * 0.5 + 0.5;
    asm volatile("" ::: "memory");  // keep every repetition
  }
}

}  // namespace

StreamMeasurement measure_stream(int64_t n, int trials) {
  StreamMeasurement m;
  m.elements = n;
  auto ta = torch::empty({n}, torch::kFloat64), tb = torch::empty({n}, torch::kFloat64),
       tc = torch::empty({n}, torch::kFloat64);
  double* a = ta.data_ptr<double>();
  double* b = tb.data_ptr<double>();
  double* c = tc.data_ptr<double>();
  for_chunks(n, [&](int64_t lo, int64_t hi) {  // first touch by the thread that uses it
    for (int64_t j = lo; j < hi; ++j) a[j] = 1.0, b[j] = 2.0, c[j] = 0.0;
  });
  for_chunks(n, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) a[j] = 2.0 * a[j];
  });
  const double s = 3.0;
  const double word = sizeof(double);
  // STREAM counts 2 arrays moved for copy and scale, 3 for add and triad; the first
  // of its repetitions is dropped as warm-up, as STREAM does.
  for (int k = 0; k <= trials; ++k) {
    const double t_copy =
        timed([&] { for_chunks(n, [&](int64_t lo, int64_t hi) { copy_kernel(c, a, lo, hi); }); });
    const double t_scale = timed(
        [&] { for_chunks(n, [&](int64_t lo, int64_t hi) { scale_kernel(b, c, s, lo, hi); }); });
    const double t_add =
        timed([&] { for_chunks(n, [&](int64_t lo, int64_t hi) { add_kernel(c, a, b, lo, hi); }); });
    const double t_triad = timed(
        [&] { for_chunks(n, [&](int64_t lo, int64_t hi) { triad_kernel(a, b, c, s, lo, hi); }); });
    if (k == 0) continue;
    m.copy.values.push_back(2 * word * n / t_copy / 1e9);
    m.scale.values.push_back(2 * word * n / t_scale / 1e9);
    m.add.values.push_back(3 * word * n / t_add / 1e9);
    m.triad.values.push_back(3 * word * n / t_triad / 1e9);
  }
  // STREAM's check: replay the kernels on scalars and compare every element.
  double aj = 2.0, bj = 2.0, cj = 0.0;
  for (int k = 0; k <= trials; ++k) cj = aj, bj = s * cj, cj = aj + bj, aj = bj + s * cj;
  std::atomic<int64_t> bad{0};
  for_chunks(n, [&](int64_t lo, int64_t hi) {
    int64_t local = 0;
    for (int64_t j = lo; j < hi; ++j)
      local += std::fabs(a[j] - aj) > 1e-13 * aj || std::fabs(b[j] - bj) > 1e-13 * bj ||
               std::fabs(c[j] - cj) > 1e-13 * cj;
    bad += local;
  });
  m.validated = bad == 0;
  m.validation = m.validated ? "all elements match the scalar replay"
                             : fmt::format("{} elements differ from the scalar replay", bad.load());
  return m;
}

std::vector<WorkingSetPoint> measure_working_sets(int64_t min_bytes, int64_t max_bytes, int trials,
                                                  double trial_s) {
  std::vector<WorkingSetPoint> out;
  const int64_t threads = at::get_num_threads();
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int64_t n = bytes / sizeof(double);
    auto tx = torch::empty({n}, torch::kFloat64);
    double* x = tx.data_ptr<double>();
    for_chunks(n, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) x[j] = 1.0;
    });
    // Each thread sweeps its own share `reps` times inside one parallel region, so small
    // working sets are not dominated by the cost of starting the region.
    auto sweep = [&](int64_t reps) {
      at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          double* p = x + n * t / threads;
          update_kernel(p, n * (t + 1) / threads - n * t / threads, reps);
        }
      });
    };
    const double once = timed([&] { sweep(1); });
    const int64_t reps = std::max<int64_t>(1, int64_t(trial_s / std::max(once, 1e-7)));
    WorkingSetPoint p{bytes, {}};
    for (int i = 0; i < trials; ++i) {
      const double dt = timed([&] { sweep(reps); });
      p.gbps.values.push_back(16.0 * n * reps / dt / 1e9);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::pair<std::string, double>> cache_bandwidths(
    const HostInfo& host, const std::vector<WorkingSetPoint>& sweep) {
  std::vector<std::pair<std::string, double>> out;
  int64_t below = 0;
  for (int level = 1; level <= 3; ++level) {
    int64_t total = 0;
    for (const auto& c : host.caches)
      if (c.level == level && c.type != "Instruction")
        total = c.size_bytes * std::max(1, c.instances);
    if (total == 0) continue;
    // The plateau of the level: the median over working sets that overflow the level
    // below and fit in half of this one (the other half leaves room for conflicts).
    Trials band;
    for (const auto& p : sweep)
      if (p.bytes <= total / 2 && p.bytes > below) band.values.push_back(p.gbps.best());
    if (!band.values.empty()) out.emplace_back("l" + std::to_string(level), band.median());
    below = total;
  }
  return out;
}

std::vector<TheoreticalPeak> theoretical_peaks(const HostInfo& h, int fma_units) {
  std::vector<TheoreticalPeak> out;
  auto has = [&](const char* f) {
    return std::find(h.simd.begin(), h.simd.end(), f) != h.simd.end();
  };
  const bool clock_known = h.max_mhz > 0;
  const double ghz = (clock_known ? h.max_mhz : h.mhz) / 1000;
  const int cores = h.physical_cores;
  if (ghz <= 0 || cores <= 0) return out;
  const auto arch = find_microarchitecture(h.vendor, h.cpu_family, h.cpu_model_number);
  const bool from_table = arch && fma_units <= 0;
  std::vector<std::string> caveats;
  if (!clock_known)
    caveats.push_back(fmt::format(
        "the clock is the nominal {:.3g} GHz /proc/cpuinfo reports ({}); the cores may run faster",
        ghz, h.virtualized ? "a virtual machine: no cpufreq limits to read" : "no cpufreq limits"));
  if (!arch)
    caveats.push_back(fmt::format(
        "microarchitecture not known to trainbench ({} family {} model "
        "{}): FLOPs per cycle from the SIMD flags",
        h.vendor.empty() ? "unknown vendor" : h.vendor, h.cpu_family, h.cpu_model_number));
  else if (!from_table)
    caveats.push_back(
        fmt::format("{} FMA units per core as given, not {}'s", fma_units, arch->name));
  if (arch && from_table && !arch->caveat.empty()) caveats.push_back(arch->caveat);
  std::string caveat;
  for (const auto& c : caveats) caveat += (caveat.empty() ? "" : "; ") + c;
  const bool verified = clock_known && from_table;
  const std::string clock = fmt::format("{:.3g} GHz ({})", ghz, clock_known ? "max" : "nominal");
  const std::string source = from_table ? arch->name : std::string("SIMD flags");

  const int lanes = has("avx512f") ? 16 : has("avx2") || has("avx") ? 8 : has("sse4_2") ? 4 : 0;
  const int units = fma_units > 0 ? fma_units : 2;
  double fp32_per_cycle = 0;
  if (from_table)  // a VM may hide AVX-512 from a core that has it
    fp32_per_cycle = lanes == 16 ? arch->fp32_flops_per_cycle
                                 : std::min(arch->fp32_flops_per_cycle, 2.0 * lanes * 2);
  else if (lanes > 0)
    fp32_per_cycle = (has("fma") || has("avx512f") ? units : 1) * lanes * 2;
  if (fp32_per_cycle > 0)
    out.push_back({"fp32", cores * ghz * 1e9 * fp32_per_cycle,
                   fmt::format("{} cores x {} x {:g} fp32 FLOPs/cycle ({})", cores, clock,
                               fp32_per_cycle, source),
                   verified, caveat});
  double bf16_per_cycle = 0;
  std::string bf16_how;
  if (has("amx_bf16")) {
    bf16_per_cycle =
        from_table && arch->amx_bf16_flops_per_cycle > 0 ? arch->amx_bf16_flops_per_cycle : 1024;
    bf16_how = "AMX";
  } else if (has("avx512_bf16")) {
    bf16_per_cycle = from_table && arch->bf16_flops_per_cycle > 0 ? arch->bf16_flops_per_cycle
                                                                  : 2 * fp32_per_cycle;
    bf16_how = "VDPBF16PS";
  }
  if (bf16_per_cycle > 0)
    out.push_back({"bf16", cores * ghz * 1e9 * bf16_per_cycle,
                   fmt::format("{} cores x {} x {:g} bf16 FLOPs/cycle ({}, {})", cores, clock,
                               bf16_per_cycle, bf16_how, source),
                   verified, caveat});
  return out;
}

}  // namespace tb
