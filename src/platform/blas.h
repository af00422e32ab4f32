#pragma once
#include <string>

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

// One line to print when the BLAS runs a thread pool of its own (OpenBLAS's or BLIS's pthread
// build) beside LibTorch's `intra_op_threads` OpenMP threads, > 1: the two pools then put up
// to twice the threads on the cores (empty otherwise).
std::string threaded_blas_warning(const BlasInfo& info, int intra_op_threads);

}  // namespace tb
