#include "record/context.h"

#include "git_revision.h"
#include "platform/framework.h"

namespace tb {

Context current_context() {
  Context c;
  c.host = host_info();
  c.blas = detect_blas();
  const FrameworkInfo fw = framework_info();
  c.libtorch_version = fw.version;
  c.compiler = "gcc " __VERSION__;
#ifdef __clang__
  c.compiler = "clang " __clang_version__;
#endif
  c.trainbench_version = TB_VERSION;
  c.git_revision = TB_GIT_REVISION;
  c.onednn = fw.onednn;
  c.openmp_threads = fw.intra_op_threads;
  c.runtime_env = fw.runtime_env;
  c.affinity = cpu_affinity();
  c.core_round_trip = core_round_trip();
  c.blas_pool = c.blas.variant == "openmp"    ? "openmp (shared with LibTorch)"
                : c.blas.variant == "pthread" ? "own pthread pool"
                : c.blas.variant == "serial" || c.blas.name == "reference"
                    ? "none (single-threaded)"
                    : "unknown";
  c.flush_denormal = fw.flush_denormal;
  return c;
}

std::string trainbench_version_string() {
  return std::string(TB_VERSION) + " (git " + TB_GIT_REVISION + ")";
}

}  // namespace tb
