#include "spec/stack.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/errors.h"

namespace tb {
namespace {

// Debian installs each BLAS variant in its own directory under the multiarch library dir;
// TB_BLAS_ROOT replaces that root (tests use it to simulate a missing library).
std::string lib_root() {
  if (const char* r = std::getenv("TB_BLAS_ROOT")) return r;
#if defined(__x86_64__)
  return "/usr/lib/x86_64-linux-gnu";
#elif defined(__aarch64__)
  return "/usr/lib/aarch64-linux-gnu";
#else
  return "/usr/lib";
#endif
}

}  // namespace

bool StackSpec::is_default() const { return str().empty(); }

std::string StackSpec::str() const {
  const StackSpec d{};
  if (blas == d.blas && blas_threads == d.blas_threads && onednn == d.onednn && mode == d.mode)
    return "";
  return "stack:blas=" + blas + ",blas_threads=" + std::to_string(blas_threads) +
         ",onednn=" + onednn + ",mode=" + mode;
}

std::string StackSpec::label() const {
  const StackSpec d{};
  std::string out;
  auto add = [&](const std::string& kv) { out += (out.empty() ? "" : ",") + kv; };
  if (blas != d.blas) add("blas=" + blas);
  if (blas_threads != d.blas_threads) add("blas_threads=" + std::to_string(blas_threads));
  if (onednn != d.onednn) add("onednn=" + onednn);
  if (mode != d.mode) add("mode=" + mode);
  return out.empty() ? "default" : out;
}

StackSpec parse_stack(const std::string& text) {
  StackSpec s;
  std::string body = text;
  if (body.rfind("stack:", 0) == 0) body = body.substr(6);
  if (body.empty()) return s;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    const std::string kv = body.substr(pos, comma - pos);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError("stack: '" + kv + "' is not key=value");
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "blas") {
      if (v != "default" && v != "system") find_blas(v);
      s.blas = v;
    } else if (k == "blas_threads") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 1024)
        throw UsageError("stack: blas_threads=" + v + " is not a count 0..1024");
      s.blas_threads = int(n);
    } else if (k == "onednn") {
      if (v != "on" && v != "off") throw UsageError("stack: onednn=" + v + " (expected on or off)");
      s.onednn = v;
    } else if (k == "mode") {
      if (v != "eager" && v != "torchscript")
        throw UsageError("stack: mode=" + v + " (expected eager or torchscript)");
      s.mode = v;
    } else {
      throw UsageError("stack: unknown key '" + k + "' (known: blas, blas_threads, onednn, mode)");
    }
    pos = comma + 1;
  }
  return s;
}

bool BlasLibrary::installed() const { return access((dir + "/libblas.so.3").c_str(), R_OK) == 0; }

const std::vector<BlasLibrary>& blas_libraries() {
  static const std::vector<BlasLibrary> libs = [] {
    const std::string r = lib_root();
    return std::vector<BlasLibrary>{
        {"openblas-pthread", "libopenblas0-pthread", r + "/openblas-pthread"},
        {"openblas-openmp", "libopenblas0-openmp", r + "/openblas-openmp"},
        {"openblas-serial", "libopenblas0-serial", r + "/openblas-serial"},
        {"blis-pthread", "libblis4-pthread", r + "/blis-pthread"},
        {"blis-openmp", "libblis4-openmp", r + "/blis-openmp"},
        {"blis-serial", "libblis4-serial", r + "/blis-serial"},
        {"atlas", "libatlas3-base", r + "/atlas"},
        {"reference", "libblas3", r + "/blas"},
    };
  }();
  return libs;
}

const BlasLibrary& find_blas(const std::string& name) {
  for (const auto& b : blas_libraries())
    if (b.name == name) return b;
  std::string known = "default, system";
  for (const auto& b : blas_libraries()) known += ", " + b.name;
  throw UsageError("stack: unknown BLAS '" + name + "' (known: " + known + ")");
}

std::string default_blas() {
  const BlasLibrary& openmp = find_blas("openblas-openmp");
  return openmp.installed() ? openmp.name : "system";
}

std::vector<std::string> stack_packages(const std::vector<StackSpec>& stacks) {
  std::vector<std::string> out;
  for (const auto& s : stacks) {
    if (s.blas == "default" || s.blas == "system") continue;
    const std::string p = find_blas(s.blas).package;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace tb
