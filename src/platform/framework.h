#pragma once
// What the training framework (LibTorch) says about this process. The platform and record
// stages are built without LibTorch, so they cannot ask it themselves: the runner stage, which
// links it, installs the probe when the program starts. A program without the runner (the
// torch-free tests) gets an empty answer and `known` false.
#include <string>
#include <utility>
#include <vector>

namespace tb {

struct FrameworkInfo {
  bool known = false;
  std::string version;       // LibTorch's, "1.13.1"
  std::string build_config;  // at::show_config(): how LibTorch was built (BLAS_INFO=...)
  bool onednn = false;       // built with oneDNN (MKL-DNN)
  int intra_op_threads = 0;  // LibTorch's OpenMP threads now
  bool flush_denormal = false;
  // The runtime variables trainbench sets before start-up (OMP_*, GOMP_*, MALLOC_*).
  std::vector<std::pair<std::string, std::string>> runtime_env;
};

using FrameworkProbe = FrameworkInfo (*)();
void set_framework_probe(FrameworkProbe probe);
FrameworkInfo framework_info();

}  // namespace tb
