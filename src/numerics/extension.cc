#include "numerics/extension.h"

#include <dlfcn.h>

#include <vector>

#include "base/errors.h"

namespace tb::num {

std::shared_ptr<const Extension> Extension::load(const std::string& path) {
  // RTLD_LOCAL: two extensions may define the same symbol names.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw UsageError("cannot load extension '" + path + "': " + (e ? e : "unknown error"));
  }
  std::shared_ptr<Extension> x(new Extension);
  x->path_ = path;
  x->handle_ = h;
  std::string missing;
  auto sym = [&](const char* name, bool required) {
    void* p = dlsym(h, name);
    if (!p && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
    return p;
  };
  x->convert_ = reinterpret_cast<uint32_t (*)(float)>(sym("tb_convert", true));
  x->as_float_ = reinterpret_cast<float (*)(uint32_t)>(sym("tb_as_float", true));
  x->add_ = reinterpret_cast<uint32_t (*)(uint32_t, uint32_t)>(sym("tb_add", true));
  x->mul_ = reinterpret_cast<uint32_t (*)(uint32_t, uint32_t)>(sym("tb_mul", true));
  x->mad_ = reinterpret_cast<uint32_t (*)(uint32_t, uint32_t, uint32_t)>(sym("tb_mad", true));
  x->name_ = reinterpret_cast<const char* (*)()>(sym("tb_name", false));
  x->act_ = reinterpret_cast<float (*)(float)>(sym("tb_activation", false));
  x->act_grad_ = reinterpret_cast<float (*)(float)>(sym("tb_activation_grad", false));
  if (!missing.empty())
    throw UsageError("extension '" + path + "' lacks " + missing +
                     " (required: tb_convert, tb_as_float, tb_add, tb_mul, tb_mad; see "
                     "src/numerics/tb_extension.h)");
  if (bool(x->act_) != bool(x->act_grad_))
    throw UsageError("extension '" + path +
                     "' defines only one of tb_activation and tb_activation_grad");
  return x;
}

Extension::~Extension() {
  if (handle_) dlclose(handle_);
}

std::string Extension::name() const { return name_ ? std::string(name_()) : path_; }

void Extension::round(const float* in, float* out, size_t n) const {
  for (size_t i = 0; i < n; ++i) out[i] = as_float_(convert_(in[i]));
}

void Extension::matmul(const float* A, const float* B, float* C, int64_t M, int64_t N,
                       int64_t K) const {
  std::vector<uint32_t> a(size_t(M * K)), b(size_t(K * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = convert_(A[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = convert_(B[i]);
  const uint32_t zero = convert_(0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      uint32_t acc = zero;
      for (int64_t k = 0; k < K; ++k) acc = mad_(acc, a[size_t(i * K + k)], b[size_t(k * N + j)]);
      C[i * N + j] = as_float_(acc);
    }
}

void Extension::activation(const float* in, float* out, size_t n) const {
  if (!act_) throw UsageError("extension '" + path_ + "' has no tb_activation");
  for (size_t i = 0; i < n; ++i) out[i] = act_(in[i]);
}

void Extension::activation_grad(const float* in, float* out, size_t n) const {
  if (!act_grad_) throw UsageError("extension '" + path_ + "' has no tb_activation_grad");
  for (size_t i = 0; i < n; ++i) out[i] = act_grad_(in[i]);
}

}  // namespace tb::num
