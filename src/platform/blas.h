#pragma once
#include <string>
#include <vector>

namespace tb {

// The BLAS that LibTorch's GEMM calls actually reach in this process, found by asking
// the dynamic linker which library provides `sgemm_` (not by trusting the alternatives).
struct BlasInfo {
  std::string name;     // openblas, blis, atlas, mkl, reference, unknown
  std::string variant;  // pthread, openmp, serial, or empty
  std::string library;  // real path of the library providing sgemm_
  std::string version;  // the library's own version/config string where it has one
  int threads = 0;      // the BLAS's own thread count, 0 where it cannot be asked
  bool slow() const { return name == "reference"; }
  std::string label() const { return variant.empty() ? name : name + "-" + variant; }
};

BlasInfo detect_blas();

// Sets the BLAS's own thread count where the library lets us; returns false otherwise.
bool set_blas_threads(int threads);

// One line to print when the BLAS is the slow reference implementation (empty otherwise).
std::string slow_blas_warning(const BlasInfo& info);

// OpenBLAS built with DYNAMIC_ARCH picks its kernels by CPU model, and a release older than
// the CPU falls back to a generic core: Debian's 0.3.21 runs Prescott (SSE3) kernels on
// Xeons of model 207, at about a third of its AVX-512 kernels' GEMM speed. Given OpenBLAS's
// config string ("OpenBLAS 0.3.21 ... Prescott MAX_THREADS=64") and the CPU's flags, the core
// to ask for through OPENBLAS_CORETYPE: SkylakeX with AVX-512 (F, BW, DQ, VL), Haswell with
// AVX2 and FMA; empty when OpenBLAS chose a core of its own or the CPU has neither.
std::string openblas_core_override(const std::string& openblas_config,
                                   const std::vector<std::string>& cpu_flags);
// The same for this process: the loaded OpenBLAS (empty when it is not OpenBLAS) and this CPU.
std::string openblas_core_override();
// The same for the BLAS library at `path`, loaded for the question (empty when it cannot be).
std::string openblas_core_override_of(const std::string& path);
// Whether a BLAS (a library providing sgemm_) is loaded in this process.
bool blas_loaded();

// One line to print when the user's OPENBLAS_CORETYPE (`coretype`, null where unset) has a
// DYNAMIC_ARCH OpenBLAS run kernels narrower than the CPU's vectors: Haswell's (AVX2) on an
// AVX-512 CPU ran a GEMM-bound fc step 1.6x slower than OpenBLAS's own choice on an EPYC
// (Zen 5). trainbench keeps a user's choice, so it says so instead (empty otherwise, and for
// cores it does not rank).
std::string narrow_kernels_warning(const std::string& openblas_config,
                                   const std::vector<std::string>& cpu_flags, const char* coretype);
// The same for this process: the loaded OpenBLAS, this CPU and its environment; once per
// command, and not of a value trainbench set itself.
std::string narrow_kernels_warning();

// One line to print when the BLAS runs a thread pool of its own (OpenBLAS's or BLIS's pthread
// build) beside LibTorch's `intra_op_threads` OpenMP threads, > 1: the two pools then put up
// to twice the threads on the cores (empty otherwise).
std::string threaded_blas_warning(const BlasInfo& info, int intra_op_threads);

}  // namespace tb
