#include "record/context.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include "git_revision.h"
#include "runner/threads.h"

namespace tb {

Context current_context() {
  Context c;
  c.host = host_info();
  c.blas = detect_blas();
  c.libtorch_version = TORCH_VERSION;
  c.compiler = "gcc " __VERSION__;
#ifdef __clang__
  c.compiler = "clang " __clang_version__;
#endif
  c.trainbench_version = TB_VERSION;
  c.git_revision = TB_GIT_REVISION;
  c.onednn = at::hasMKLDNN();
  c.openmp_threads = at::get_num_threads();
  c.runtime_env = runtime_environment();
  c.affinity = cpu_affinity();
  c.blas_pool = c.blas.variant == "openmp"    ? "openmp (shared with LibTorch)"
                : c.blas.variant == "pthread" ? "own pthread pool"
                : c.blas.variant == "serial" || c.blas.name == "reference" ? "none (single-threaded)"
                                              : "unknown";
  // setFlushDenormal returns whether the CPU supports it; re-setting keeps the state.
  c.flush_denormal = prepared_runtime();
  return c;
}

std::string trainbench_version_string() {
  return std::string(TB_VERSION) + " (git " + TB_GIT_REVISION + ")";
}

}  // namespace tb
