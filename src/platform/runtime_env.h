#pragma once
// The environment trainbench runs in: what the OpenMP runtime, the C allocator and the dynamic
// linker read only when a process starts (docs/stacks.md). Without LibTorch, so that the
// `trainbench` launcher (src/cli/launcher.cc) can set it before LibTorch is ever loaded.
#include <string>
#include <utility>
#include <vector>

namespace tb {

// Sets what is unset of it: GOMP_SPINCOUNT and the malloc thresholds, the default BLAS's
// library path (default_blas(): OpenBLAS's OpenMP build where installed) unless a BLAS was
// entered already, and OPENBLAS_CORETYPE where OpenBLAS would fall back to a generic core;
// marks the environment done (TB_RUNTIME_ENV). Returns whether anything was set that only a
// new process picks up. Values the user set are kept; a no-op once marked.
bool set_runtime_environment();

// The variables above as they are in this process, for the result's context block.
std::vector<std::pair<std::string, std::string>> runtime_environment();

// The environment that makes a new process load BLAS `name` (a blas_libraries() name or
// "system"): the library path with its directory first, the user's own path after it, and
// TB_STACK_BLAS naming what was entered so that the process does not enter it again.
std::vector<std::pair<std::string, std::string>> blas_environment(const std::string& name);

}  // namespace tb
