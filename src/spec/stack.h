#pragma once
// The software under a model as an axis of an experiment (ParaDnn section 6):
// `stack:blas=blis-pthread,blas_threads=2,onednn=off,mode=torchscript`. Like configs, a
// stack's text form is canonical and round-trips; the default stack prints as "".
#include <string>
#include <vector>

namespace tb {

struct StackSpec {
  // A name from blas_libraries(); "system": the system's alternative as it is; "default":
  // default_blas(), the build that shares LibTorch's OpenMP runtime when it is installed.
  std::string blas = "default";
  int blas_threads = 0;        // the BLAS's own threads; 0: as it decides
  std::string onednn = "on";   // LibTorch's global oneDNN switch: on, off
  std::string mode = "eager";  // eager, torchscript (the loss traced and run by the graph executor)
  bool is_default() const;
  std::string str() const;  // "stack:blas=...,blas_threads=...,onednn=...,mode=..." or ""
  // Only what differs from the default ("blas=blis-pthread,mode=torchscript"), or
  // "default": how analyses and reports name a stack.
  std::string label() const;
  bool operator==(const StackSpec& o) const { return str() == o.str(); }
};

// Parses "stack:k=v,..." (the "stack:" prefix is optional). Throws UsageError naming the
// bad key or value.
StackSpec parse_stack(const std::string& text);

// A Debian BLAS that LibTorch can run on, chosen per process through the library path.
struct BlasLibrary {
  std::string name;     // openblas-pthread, blis-openmp, atlas, reference, ...
  std::string package;  // the Debian package that provides it
  std::string dir;      // the directory holding its libblas.so.3
  bool installed() const;
};
const std::vector<BlasLibrary>& blas_libraries();
// UsageError for an unknown name (listing the known ones).
const BlasLibrary& find_blas(const std::string& name);
// What blas=default runs on: openblas-openmp when installed, else "system". A BLAS with a
// thread pool of its own beside LibTorch's OpenMP pool puts twice the threads on the cores
// (docs/stacks.md); the OpenMP build runs its GEMMs on LibTorch's own pool.
std::string default_blas();
// The Debian packages the stacks need (for `scripts/setup.sh stacks`).
std::vector<std::string> stack_packages(const std::vector<StackSpec>& stacks);

}  // namespace tb
