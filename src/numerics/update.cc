#include "numerics/update.h"

#include <algorithm>
#include <cmath>

#include "numerics/round_bits.h"

namespace tb::num {

namespace {

// |x|'s bits, 0 for a NaN (Inf counts): the amaxes the fused update folds, as quantize's amax
// passes count them.
inline uint32_t finite_abs_bits(float x) {
  const uint32_t a = kernel::as_bits(x) & 0x7FFFFFFFu;
  return a & (0u - uint32_t(a <= kernel::kInfBits));
}

}  // namespace

// The library compiles without contraction (-ffp-contract=off), so these products and sums
// round separately, as ATen's do.
TB_NUM_CLONES void momentum_buffer(float* buf, const float* g, size_t n, float momentum) {
  for (size_t i = 0; i < n; ++i) buf[i] = buf[i] * momentum + g[i];
}

// Clones with an FMA unit, where std::fma is one instruction that vectorises ("fma" implies
// AVX); the baseline clone calls the C library's, which gives the same value.
#if TB_X86_KERNELS
__attribute__((target_clones("avx512f", "fma", "default")))
#endif
void add_scaled(float* p, const float* v, size_t n, float alpha) {
  for (size_t i = 0; i < n; ++i) p[i] = std::fma(v[i], alpha, p[i]);
}

// Clones as add_scaled's, and Haswell's (AVX2 with FMA) for the amaxes' integer maxima.
#if TB_X86_KERNELS
__attribute__((target_clones("avx512f", "arch=haswell", "fma", "default")))
#endif
void momentum_add_amax(float* p, float* buf, const float* g, size_t n, float momentum,
                       float alpha, uint32_t* amax_buf, uint32_t* amax_p) {
  uint32_t mb = 0, mp = 0;
  for (size_t i = 0; i < n; ++i) {
    const float b = buf[i] * momentum + g[i];
    const float q = std::fma(b, alpha, p[i]);
    buf[i] = b;
    p[i] = q;
    mb = std::max(mb, finite_abs_bits(b));
    mp = std::max(mp, finite_abs_bits(q));
  }
  *amax_buf = std::max(*amax_buf, mb);
  *amax_p = std::max(*amax_p, mp);
}

TB_NUM_CLONES void sub_product(float* p, const float* v, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] = p[i] - v[i] * lr;
}

// Clones as momentum_add_amax's.
#if TB_X86_KERNELS
__attribute__((target_clones("avx512f", "arch=haswell", "fma", "default")))
#endif
void momentum_buffer_amax(float* buf, const float* g, size_t n, float momentum, uint32_t* amax) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float b = buf[i] * momentum + g[i];
    buf[i] = b;
    m = std::max(m, finite_abs_bits(b));
  }
  *amax = std::max(*amax, m);
}

#if TB_X86_KERNELS
__attribute__((target_clones("avx512f", "arch=haswell", "fma", "default")))
#endif
void sub_product_amax(float* p, const float* v, size_t n, float lr, uint32_t* amax) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float q = p[i] - v[i] * lr;
    p[i] = q;
    m = std::max(m, finite_abs_bits(q));
  }
  *amax = std::max(*amax, m);
}

}  // namespace tb::num
