// Answers platform/framework.h's questions from LibTorch, for every program that links the
// runner stage: the stages below it are built without LibTorch.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

#include "platform/framework.h"
#include "runner/threads.h"

namespace tb {
namespace {

FrameworkInfo libtorch_info() {
  FrameworkInfo f;
  f.known = true;
  f.version = TORCH_VERSION;
  // Fixed for the life of the process, and the probe runs once per result document.
  static const std::string build_config = at::show_config();
  f.build_config = build_config;
  f.onednn = at::hasMKLDNN();
  f.intra_op_threads = at::get_num_threads();
  // prepare_runtime() records whether the CPU flushes denormals; re-asking would change it.
  f.flush_denormal = prepared_runtime();
  f.runtime_env = runtime_environment();
  return f;
}

const bool installed = (set_framework_probe(&libtorch_info), true);

}  // namespace
}  // namespace tb
