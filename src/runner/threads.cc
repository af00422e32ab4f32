#include "runner/threads.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdlib>

#include "platform/blas.h"
#include "platform/host.h"
#include "runner/stack_runtime.h"

namespace tb {

int apply_threads(int threads) {
  const int n = threads > 0 ? threads : online_cpus();
  at::set_num_threads(n);
  set_blas_threads(n);
  return n;
}

}  // namespace tb

namespace tb {

namespace {
bool denormals_flushed = false;
}
void prepare_runtime() { denormals_flushed = at::globalContext().setFlushDenormal(true); }
bool prepared_runtime() { return denormals_flushed; }

}  // namespace tb

namespace tb {
namespace {
// Set when unset (a null value: only recorded). GOMP_SPINCOUNT: an OpenMP worker spins about
// 10-30 us for the next parallel region, then sleeps. Beside OpenBLAS's pthread pool both
// extremes cost whole factors on these machines (PASSIVE: every region of a small operator
// waited ~85 us for a wake-up; ACTIVE: workers took the cores from the BLAS's threads). With the
// OpenMP BLAS, one pool, the spin barely matters (bench/runtime_env.sh: within ~4% either way);
// the short spin stays because it bounds what an idle worker takes from what runs next. The
// malloc thresholds keep large tensors mapped between steps (up to 15% on small cnn steps).
const std::pair<const char*, const char*> kRuntimeEnv[] = {
    {"GOMP_SPINCOUNT", "10000"},
    {"OMP_WAIT_POLICY", nullptr},
    {"OPENBLAS_CORETYPE", nullptr},  // set where OpenBLAS would fall back (platform/blas.h)
    {"OMP_PROC_BIND", nullptr},      // thread placement, when the user pins (docs/stacks.md)
    {"OMP_PLACES", nullptr},
    {"MALLOC_MMAP_THRESHOLD_", "33554432"},  // glibc's largest accepted value, 32 MiB
    {"MALLOC_TRIM_THRESHOLD_", "68719476736"},
};
}  // namespace

namespace {
char** saved_argv = nullptr;
}

void reexec_with(const std::vector<std::pair<std::string, std::string>>& env) {
  if (!saved_argv) return;
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  execv("/proc/self/exe", saved_argv);
}

void ensure_runtime_environment(int argc, char** argv) {
  saved_argv = argv;
  if (std::getenv("TB_RUNTIME_ENV")) return;
  bool changed = false;
  for (const auto& [key, value] : kRuntimeEnv)
    if (value && !std::getenv(key)) changed |= setenv(key, value, 0) == 0;
  // OpenBLAS reads OPENBLAS_CORETYPE when it is loaded. The OpenBLAS loaded now (the system's)
  // detects the CPU as the one about to be entered would, being the same release.
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const std::string core = openblas_core_override();
    if (!core.empty()) changed |= setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0;
  }
  // The default BLAS is entered in the same re-execution; a stack that names another one
  // re-executes once more when its command starts (enter_blas).
  if (!std::getenv("TB_STACK_BLAS")) {
    const std::string blas = default_blas();
    for (const auto& [key, value] : blas_environment(blas)) setenv(key.c_str(), value.c_str(), 1);
    changed |= blas != "system";
  }
  setenv("TB_RUNTIME_ENV", "1", 1);
  if (!changed) return;
  (void)argc;
  execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

std::vector<std::pair<std::string, std::string>> runtime_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : kRuntimeEnv) {
    const char* v = std::getenv(key);
    out.emplace_back(key, v ? v : "");
  }
  return out;
}

}  // namespace tb
