#pragma once
// Putting a requested software stack in place in this process, and finding out what
// actually ran: a result whose detected stack differs from the requested one says so.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "platform/runtime_env.h"  // blas_environment()
#include "spec/stack.h"

namespace tb {

// The BLAS is chosen before LibTorch resolves its symbols, so a stack naming one
// re-executes the program once with that library's directory first on the library path
// (the system's alternatives are untouched). Throws UsageError when it is not installed.
// blas=default is default_blas(), which ensure_runtime_environment() has already entered.
void enter_blas(const StackSpec& stack);

// The BLAS name this process was entered with ("" when none was: a test or a library user).
std::string entered_blas();

// In-process settings: LibTorch's oneDNN switch and the BLAS's own thread count.
// Call after the intra-op threads are applied.
void apply_stack(const StackSpec& stack);

struct DetectedStack {
  std::string blas;  // the BLAS providing sgemm_ (openblas-pthread, blis-openmp, reference, ...)
  int blas_threads = 0;
  bool onednn = false;  // built with oneDNN and the switch on
  std::string mode;     // what the runner executed
  int threads = 0;      // LibTorch intra-op threads
};
DetectedStack detect_stack(const std::string& mode);
// Why the detected stack is not the requested one ("" when it is).
std::string stack_mismatch(const StackSpec& requested, const DetectedStack& detected);
nlohmann::json to_json(const DetectedStack& d);

}  // namespace tb
