#include "numerics/update.h"

#include <algorithm>
#include <cmath>

#include "numerics/round_bits.h"

namespace tb::num {

// The library compiles without contraction (-ffp-contract=off), so these products and sums
// round separately, as ATen's do.
TB_NUM_CLONES void momentum_buffer(float* buf, const float* g, size_t n, float momentum) {
  for (size_t i = 0; i < n; ++i) buf[i] = buf[i] * momentum + g[i];
}

// Clones with an FMA unit, where std::fma is one instruction that vectorises ("fma" implies
// AVX); the baseline clone calls the C library's, which gives the same value.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "fma", "default")))
#endif
void add_scaled(float* p, const float* v, size_t n, float alpha) {
  for (size_t i = 0; i < n; ++i) p[i] = std::fma(v[i], alpha, p[i]);
}

// Clones as add_scaled's, and Haswell's (AVX2 with FMA) for the amaxes' integer maxima.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
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
    const uint32_t ab = kernel::as_bits(b) & 0x7FFFFFFFu, aq = kernel::as_bits(q) & 0x7FFFFFFFu;
    mb = std::max(mb, ab & (0u - uint32_t(ab <= kernel::kInfBits)));
    mp = std::max(mp, aq & (0u - uint32_t(aq <= kernel::kInfBits)));
  }
  *amax_buf = std::max(*amax_buf, mb);
  *amax_p = std::max(*amax_p, mp);
}

TB_NUM_CLONES void sub_product(float* p, const float* v, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] = p[i] - v[i] * lr;
}

}  // namespace tb::num
