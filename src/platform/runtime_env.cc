#include "platform/runtime_env.h"

#include <cstdlib>

#include "platform/blas.h"
#include "spec/stack.h"

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

bool set_runtime_environment() {
  if (std::getenv("TB_RUNTIME_ENV")) return false;
  bool changed = false;
  for (const auto& [key, value] : kRuntimeEnv)
    if (value && !std::getenv(key)) changed |= setenv(key, value, 0) == 0;
  // The default BLAS is entered in the same (re-)execution, unless one was entered already;
  // a stack that names another one re-executes once more when its command starts (enter_blas).
  const char* entered = std::getenv("TB_STACK_BLAS");
  const std::string blas = entered ? "" : default_blas();
  // OpenBLAS reads OPENBLAS_CORETYPE when it is loaded: asked of the OpenBLAS this process has
  // loaded, or, in the launcher, which loads none, of the one the program will run on.
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    std::string core = openblas_core_override();
    const std::string target = entered ? entered : blas;
    if (core.empty() && !blas_loaded()) {
      std::string path = "libblas.so.3";  // "system": what the dynamic linker finds
      for (const auto& lib : blas_libraries())
        if (lib.name == target) path = lib.dir + "/libblas.so.3";
      core = openblas_core_override_of(path);
    }
    if (!core.empty()) {
      changed |= setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0;
      setenv("TB_OPENBLAS_CORETYPE_SET", core.c_str(), 1);  // not the user's: no warning of it
    }
  }
  if (!blas.empty()) {
    for (const auto& [key, value] : blas_environment(blas)) setenv(key.c_str(), value.c_str(), 1);
    changed |= blas != "system";
  }
  setenv("TB_RUNTIME_ENV", "1", 1);
  return changed;
}

std::vector<std::pair<std::string, std::string>> runtime_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : kRuntimeEnv) {
    const char* v = std::getenv(key);
    out.emplace_back(key, v ? v : "");
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> blas_environment(const std::string& name) {
  // The user's own library path is kept once, so entering a second BLAS (a stack's, after
  // the default) replaces the first instead of stacking both directories.
  const char* user = std::getenv("TB_USER_LD_LIBRARY_PATH");
  if (!user) user = std::getenv("LD_LIBRARY_PATH");
  const std::string base = user ? user : "";
  std::string path = base;
  if (name != "system") path = find_blas(name).dir + (base.empty() ? "" : ":" + base);
  return {{"LD_LIBRARY_PATH", path}, {"TB_USER_LD_LIBRARY_PATH", base}, {"TB_STACK_BLAS", name}};
}

}  // namespace tb
