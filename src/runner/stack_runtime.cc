#include "runner/stack_runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <cstdlib>

#include "base/errors.h"
#include "platform/blas.h"
#include "runner/threads.h"

namespace tb {

std::string entered_blas() {
  const char* e = std::getenv("TB_STACK_BLAS");
  return e ? e : "";
}

void enter_blas(const StackSpec& stack) {
  const std::string name = stack.blas == "default" ? default_blas() : stack.blas;
  if (name != "system") {
    const BlasLibrary& lib = find_blas(name);
    if (!lib.installed())
      throw UsageError("stack: BLAS '" + name + "' is not installed (" + lib.dir +
                       "/libblas.so.3 missing; Debian package " + lib.package +
                       ", which `scripts/setup.sh stacks SWEEP` installs)");
  }
  // A process that was not started through ensure_runtime_environment (a test) runs on
  // what it has, unless a stack names another BLAS.
  const std::string entered = entered_blas();
  if (entered == name || (entered.empty() && stack.blas == "default")) return;
  reexec_with(blas_environment(name));
  throw std::runtime_error("could not re-execute trainbench with BLAS " + name);
}

void apply_stack(const StackSpec& stack) {
  at::globalContext().setUserEnabledMkldnn(stack.onednn == "on");
  if (stack.blas_threads > 0) set_blas_threads(stack.blas_threads);
}

DetectedStack detect_stack(const std::string& mode) {
  DetectedStack d;
  const BlasInfo b = detect_blas();
  d.blas = b.label();
  d.blas_threads = b.threads;
  d.onednn = at::hasMKLDNN() && at::globalContext().userEnabledMkldnn();
  d.mode = mode;
  d.threads = at::get_num_threads();
  return d;
}

std::string stack_mismatch(const StackSpec& r, const DetectedStack& d) {
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  // blas=default is what this process entered; a process that entered none (a test) runs on
  // what the system gave it, which is no mismatch.
  const std::string blas = r.blas == "default" ? entered_blas() : r.blas;
  if (!blas.empty() && blas != "system" && blas != d.blas)
    add("requested BLAS " + blas + ", detected " + d.blas);
  if (r.onednn == "on" && !d.onednn) add("requested oneDNN on, but LibTorch has no oneDNN");
  if (r.onednn == "off" && d.onednn) add("requested oneDNN off, detected on");
  // A BLAS without a thread switch (reference, ATLAS) reports 0 threads: not a mismatch.
  if (r.blas_threads > 0 && d.blas_threads > 0 && d.blas_threads != r.blas_threads)
    add("requested " + std::to_string(r.blas_threads) + " BLAS threads, detected " +
        std::to_string(d.blas_threads));
  if (r.mode != d.mode) add("requested mode " + r.mode + ", ran " + d.mode);
  return why;
}

nlohmann::json to_json(const DetectedStack& d) {
  return {{"blas", d.blas},
          {"blas_threads", d.blas_threads},
          {"onednn", d.onednn ? "on" : "off"},
          {"mode", d.mode},
          {"threads", d.threads}};
}

}  // namespace tb
