#include "numerics/update.h"

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

TB_NUM_CLONES void sub_product(float* p, const float* v, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] = p[i] - v[i] * lr;
}

}  // namespace tb::num
