#include "platform/blas.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "platform/framework.h"
#include "spec/printable.h"

namespace tb {
namespace {

std::string real_path(const char* path) {
  char buf[PATH_MAX];
  return realpath(path, buf) ? std::string(buf) : std::string(path);
}

template <typename Fn>
Fn find(const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
}

std::string variant_from(const std::string& path, const std::string& lib) {
  for (const char* v : {"pthread", "openmp", "serial"})
    if (path.find(lib + "-" + v) != std::string::npos) return v;
  return "";
}

}  // namespace

BlasInfo detect_blas() {
  BlasInfo info;
  info.name = "unknown";
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (!sgemm || !dladdr(sgemm, &where) || !where.dli_fname) {
    // LibTorch builds with a statically linked, hidden BLAS (MKL in the official 2.x
    // packages) export no sgemm_: ask LibTorch what it was built with instead.
    const std::string cfg = framework_info().build_config;
    const auto at = cfg.find("BLAS_INFO=");
    if (at != std::string::npos) {
      const std::string v = cfg.substr(at + 10, cfg.find_first_of(", \n", at + 10) - at - 10);
      info.name = v == "mkl" ? "mkl" : v == "open" ? "openblas" : v;
      info.library = "built into LibTorch";
    }
    return info;
  }
  info.library = real_path(where.dli_fname);
  const std::string& p = info.library;
  if (p.find("openblas") != std::string::npos) {
    info.name = "openblas";
    info.variant = variant_from(p, "openblas");
    if (auto cfg = find<char* (*)()>("openblas_get_config")) info.version = cfg();
    if (auto n = find<int (*)()>("openblas_get_num_threads")) info.threads = n();
    if (info.variant.empty()) {
      if (auto par = find<int (*)()>("openblas_get_parallel"))
        info.variant = par() == 0 ? "serial" : par() == 1 ? "pthread" : "openmp";
    }
  } else if (p.find("blis") != std::string::npos) {
    info.name = "blis";
    info.variant = variant_from(p, "blis");
    if (auto v = find<const char* (*)()>("bli_info_get_version_str")) info.version = v();
    if (auto n = find<long (*)()>("bli_thread_get_num_threads")) info.threads = int(n());
  } else if (p.find("mkl") != std::string::npos) {
    info.name = "mkl";
    if (auto n = find<int (*)()>("MKL_Get_Max_Threads")) info.threads = n();
  } else if (p.find("atlas") != std::string::npos) {
    info.name = "atlas";
  } else if (p.find("/blas/") != std::string::npos || p.find("libblas.so") != std::string::npos) {
    // Debian's netlib reference BLAS lives in .../blas/libblas.so.3
    info.name = "reference";
    info.threads = 1;
  }
  return info;
}

bool set_blas_threads(int threads) {
  if (auto f = find<void (*)(int)>("openblas_set_num_threads")) {
    f(threads);
    return true;
  }
  if (auto f = find<void (*)(long)>("bli_thread_set_num_threads")) {
    f(threads);
    return true;
  }
  if (auto f = find<void (*)(int)>("MKL_Set_Num_Threads")) {
    f(threads);
    return true;
  }
  return false;
}

std::string slow_blas_warning(const BlasInfo& info) {
  if (!info.slow()) return "";
  return fmt::format(
      "WARNING: LibTorch is using the reference BLAS ({}), ~60x slower for GEMM than OpenBLAS: "
      "apt-get install libopenblas0-openmp (trainbench then runs on it; or: "
      "update-alternatives --config libblas.so.3-x86_64-linux-gnu)",
      info.library);
}

std::string openblas_core_override(const std::string& config,
                                   const std::vector<std::string>& flags) {
  if (config.rfind("OpenBLAS", 0) != 0) return "";
  auto has = [&](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
  // The cores a DYNAMIC_ARCH build falls back to on a CPU it does not know.
  bool generic = false;
  for (const char* core : {" Prescott ", " Core2 ", " Penryn ", " Dunnington ", " Nehalem ",
                           " Atom ", " Katmai ", " Northwood "})
    generic |= config.find(core) != std::string::npos;
  if (!generic) return "";
  if (has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
  return "";
}

namespace {
std::vector<std::string> cpu_flags() {
  std::vector<std::string> flags;
#if defined(__x86_64__)
  // __builtin_cpu_supports takes string literals only.
  if (__builtin_cpu_supports("avx512f")) flags.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) flags.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512dq")) flags.push_back("avx512dq");
  if (__builtin_cpu_supports("avx512vl")) flags.push_back("avx512vl");
  if (__builtin_cpu_supports("avx2")) flags.push_back("avx2");
  if (__builtin_cpu_supports("fma")) flags.push_back("fma");
#endif
  return flags;
}
}  // namespace

std::string openblas_core_override() {
  const auto cfg = find<char* (*)()>("openblas_get_config");
  return cfg ? openblas_core_override(cfg(), cpu_flags()) : "";
}

std::string openblas_core_override_of(const std::string& path) {
  // Left loaded (unloading a BLAS runs its destructors for nothing): where no BLAS was loaded,
  // the caller is the launcher, which executes the program next.
  void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return "";
  const auto cfg = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_config"));
  return cfg ? openblas_core_override(cfg(), cpu_flags()) : "";
}

bool blas_loaded() { return dlsym(RTLD_DEFAULT, "sgemm_") != nullptr; }

namespace {
// The widest vectors a core's kernels use: 3 AVX-512, 2 AVX2 with FMA, 1 older; 0 for a name
// not listed (no claim is made about it). OpenBLAS's names, as its config string spells them.
int vector_rank(std::string core) {
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* c : {"skylakex", "cooperlake", "sapphirerapids"})
    if (core == c) return 3;
  for (const char* c : {"haswell", "zen", "skylake", "excavator"})
    if (core == c) return 2;
  for (const char* c :
       {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "northwood",
        "sandybridge", "bulldozer", "piledriver", "steamroller", "barcelona", "opteron", "bobcat"})
    if (core == c) return 1;
  return 0;
}

int cpu_rank(const std::vector<std::string>& flags) {
  auto has = [&](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
  if (has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")) return 3;
  if (has("avx2") && has("fma")) return 2;
  return 1;
}
}  // namespace

std::string narrow_kernels_warning(const std::string& config, const std::vector<std::string>& flags,
                                   const char* coretype) {
  // Only a DYNAMIC_ARCH build reads the variable.
  if (!coretype || !*coretype || config.rfind("OpenBLAS", 0) != 0 ||
      config.find(" DYNAMIC_ARCH") == std::string::npos)
    return "";
  // The core OpenBLAS runs is the word before the thread setting that ends its config string:
  // MAX_THREADS=N, or SINGLE_THREADED in a serial build.
  auto end = config.find(" MAX_THREADS");
  if (end == std::string::npos) end = config.find(" SINGLE_THREADED");
  if (end == std::string::npos || end == 0) return "";
  const auto space = config.rfind(' ', end - 1);
  const size_t begin = space == std::string::npos ? 0 : space + 1;
  const std::string core = config.substr(begin, end - begin);
  const int have = cpu_rank(flags), used = vector_rank(core);
  if (used == 0 || used >= have) return "";
  static const char* const kNames[] = {"", "pre-AVX2", "AVX2", "AVX-512"};
  // What was measured: AVX2 kernels on an AVX-512 EPYC (Zen 5), and Prescott's on a Xeon with
  // AVX-512 (docs/stacks.md); other pairs are only said to be slower.
  const char* cost = used == 2 ? "GEMM-bound steps ran ~1.6x slower on an AVX-512 EPYC"
                     : have == 3
                         ? "GEMMs ran at about a third of the AVX-512 kernels' speed on a Xeon"
                         : "GEMMs run slower";
  return fmt::format(
      "WARNING: OPENBLAS_CORETYPE={} has OpenBLAS run {} ({}) kernels on a CPU with {} ({}); "
      "unset OPENBLAS_CORETYPE to measure this CPU",
      printable(coretype), core, kNames[used], kNames[have], cost);
}

std::string narrow_kernels_warning() {
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  // Said once per command (a stack's BLAS re-executes the program), and never of the value
  // trainbench chose itself (runtime_env.cc: OpenBLAS may map it to a narrower core it has).
  const char* chosen = std::getenv("TB_OPENBLAS_CORETYPE_SET");
  if (!core || std::getenv("TB_NARROW_KERNELS_SAID") || (chosen && std::string(chosen) == core))
    return "";
  const auto cfg = find<char* (*)()>("openblas_get_config");
  std::string w = cfg ? narrow_kernels_warning(cfg(), cpu_flags(), core) : "";
  if (!w.empty()) setenv("TB_NARROW_KERNELS_SAID", "1", 1);
  return w;
}

std::string threaded_blas_warning(const BlasInfo& info, int intra_op_threads) {
  if (info.variant != "pthread" || intra_op_threads <= 1) return "";
  return fmt::format(
      "WARNING: the BLAS ({}) runs its own thread pool beside LibTorch's {} OpenMP threads: "
      "they contend for the cores and small steps measure 1.4-3x slow and bimodal; "
      "apt-get install libopenblas0-openmp (trainbench then runs on it), or threads=1",
      info.library, intra_op_threads);
}

}  // namespace tb
