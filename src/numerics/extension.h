// Loads a number-format extension (numerics/tb_extension.h) with dlopen and uses it: rounding
// arrays through it, a matrix multiply on its MAD, its activation.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace tb::num {

class Extension {
 public:
  // Throws tb::UsageError: the library cannot be loaded, or lacks a required function (all
  // missing ones are named), or has only one of tb_activation / tb_activation_grad.
  static std::shared_ptr<const Extension> load(const std::string& path);
  ~Extension();

  const std::string& path() const { return path_; }
  std::string name() const;
  bool has_activation() const { return act_ != nullptr; }

  void round(const float* in, float* out, size_t n) const;  // as_float(convert(x))
  // C[M,N] = A[M,K] B[K,N]: per output acc = convert(0), acc = mad(acc, a_k, b_k) in order.
  void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) const;
  void activation(const float* in, float* out, size_t n) const;
  void activation_grad(const float* in, float* out, size_t n) const;

 private:
  Extension() = default;
  std::string path_;
  void* handle_ = nullptr;
  uint32_t (*convert_)(float) = nullptr;
  float (*as_float_)(uint32_t) = nullptr;
  uint32_t (*add_)(uint32_t, uint32_t) = nullptr;
  uint32_t (*mul_)(uint32_t, uint32_t) = nullptr;
  uint32_t (*mad_)(uint32_t, uint32_t, uint32_t) = nullptr;
  const char* (*name_)() = nullptr;
  float (*act_)(float) = nullptr;
  float (*act_grad_)(float) = nullptr;
};

}  // namespace tb::num
