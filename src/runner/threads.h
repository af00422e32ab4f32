#pragma once
#include <string>
#include <utility>
#include <vector>

#include "platform/runtime_env.h"  // runtime_environment()

namespace tb {

// Sets LibTorch's intra-op threads and the BLAS's own threads to the same count
// (0 = all online cores) and returns the count applied. LibTorch calls the BLAS from
// outside its OpenMP regions, so the two pools take turns rather than compete; giving
// both the same size keeps at most `threads` busy threads at any time.
int apply_threads(int threads);

}  // namespace tb

namespace tb {

// Process-wide settings every measurement depends on; call once before running.
// Denormals are flushed to zero: a model whose weights drift into subnormal range
// would otherwise slow down by orders of magnitude for reasons unrelated to it.
void prepare_runtime();
bool prepared_runtime();  // whether prepare_runtime() ran and the CPU flushes denormals

// Sets the environment the OpenMP runtime and the C allocator read only at process
// start (set_runtime_environment), then re-executes the program once; a no-op when already
// set, as it is under the `trainbench` launcher (src/cli/launcher.cc). Measured on this
// 2-core machine, fc:layers=4,nodes=1024,batch=512 ran at 121 GFLOP/s with the defaults
// and 196 GFLOP/s with them: OpenMP workers spinning after each parallel region fought
// the threaded BLAS for the cores, and glibc returned large tensors to the OS with munmap
// only to fault them back in on the next step. Values the user set are kept.
void ensure_runtime_environment(int argc, char** argv);

// Runs this program again from the start with the same arguments and the given
// environment variables set; returns only if that fails. Needs ensure_runtime_environment
// to have seen argv.
void reexec_with(const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace tb
