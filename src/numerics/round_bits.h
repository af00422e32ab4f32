// The float-grid rounding kernel shared by the quantizers (quantize.cc) and the MAD unit
// (mad.cc): one element rounded on its float32 bit pattern in integer arithmetic, written
// branch-free so that loops calling it vectorise. Internal to the numerics library.
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/format.h"

// Function multi-versioning: each loop is compiled for AVX-512, AVX2 and baseline x86-64 and
// the loader picks one, so the plain loops below vectorise without -march flags.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TB_NUM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TB_NUM_CLONES
#endif
// std::floor vectorises only where GCC may assume FP exceptions are not observed; the value is
// the same either way (the fixed-point loops need it).
#if defined(__GNUC__) && !defined(__clang__)
#define TB_NUM_NO_TRAPS __attribute__((optimize("no-trapping-math")))
#else
#define TB_NUM_NO_TRAPS
#endif
#define TB_INLINE inline __attribute__((always_inline))

namespace tb::num::kernel {

TB_INLINE uint32_t as_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
TB_INLINE float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TB_INLINE uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

constexpr uint32_t kQuietNan = 0x7FC00000u;
constexpr uint32_t kInfBits = 0x7F800000u;

// Everything the float kernel needs, with the format's scale folded in: a block format's
// elements are the element format's grid multiplied by the block's power of two.
struct Grid {
  int emin;            // exponent of the smallest normal value
  int man_bits;        // stored mantissa bits
  int sub;             // 1: subnormals; 0: below emin the grid is {0, 2^emin}
  uint32_t max_bits;   // float32 magnitude bits of the largest finite value
  uint32_t ovf_bits;   // what overflow (and an Inf input) becomes: max, Inf or NaN
  uint32_t zero_sign;  // 0 where the format has no negative zero (fnuz), else 0x80000000
};

// Branch-free select: GCC's if-conversion gives up on nested ternaries, so the kernel spells
// every choice as masks and the loop vectorises.
TB_INLINE uint32_t mask_of(bool c) { return 0u - uint32_t(c); }
TB_INLINE uint32_t sel(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = mask_of(c);
  return (a & m) | (b & ~m);
}
TB_INLINE int isel(bool c, int a, int b) {
  const int m = -int(c);
  return (a & m) | (b & ~m);
}
TB_INLINE int imin(int a, int b) { return isel(a < b, a, b); }
TB_INLINE int imax(int a, int b) { return isel(a > b, a, b); }

// Bits of 2^e for -149 <= e <= 127.
TB_INLINE uint32_t pow2_bits(int e) {
  const int sh = imin(imax(e + 149, 0), 31);
  const int ex = imax(e + 127, 0);
  return sel(e >= -126, uint32_t(ex) << 23, 1u << sh);
}

// One element. Rounds |x| to a multiple of its quantum 2^q in the format's grid (as if the
// exponent were unbounded), then checks overflow. The magnitude is kept as a 24-bit integer
// significand `sig` times 2^e0, so rounding is integer arithmetic on the low s = q - e0 bits.
template <Rounding R>
TB_INLINE uint32_t round_bits(uint32_t xb, const Grid& g, uint32_t rnd) {
  const uint32_t sign = xb & 0x80000000u;
  const uint32_t a = xb & 0x7FFFFFFFu;
  const int be = int(a >> 23);
  const uint32_t mant = a & 0x7FFFFFu;
  const uint32_t sig = mant | sel(be != 0, 0x800000u, 0u);
  const int bn = imax(be, 1);
  // floor(log2|x|); for float32 subnormals the int->float conversion finds the leading bit.
  const int sub_exp = int(as_bits(float(int32_t(mant))) >> 23) - 127 - 149;
  const int ex = isel(be != 0, be - 127, sub_exp);
  const int below = g.emin - g.man_bits * g.sub;
  const int q = isel(ex >= g.emin, ex - g.man_bits, below);
  const int s = q - (bn - 150);
  const int sc = imin(imax(s, 0), 25);
  const uint32_t mask = (1u << sc) - 1u;
  const uint32_t rem = sig & mask;
  const uint32_t k = sig >> sc;
  const uint32_t half = (1u << sc) >> 1;
  uint32_t up;
  if constexpr (R == Rounding::kStochastic) {
    // P(up) = rem / 2^s exactly for s <= 32 (rnd / 2^32 < rem / 2^s), to 2^-32 beyond.
    // rem is the whole significand once s >= 25 (sc stops at 25, sig < 2^24). Each shift
    // count is exact where its side of the select is taken (1 <= ss <= 32: 32 - ss; ss > 32:
    // ss - 32, up to 24 where r >> 24 = 0); the `& 31` only keeps the other side defined.
    // s <= 0 is exact and never rounds up.
    const int ss = imin(s, 56);
    const uint32_t thr_lo = rem << ((32 - ss) & 31);
    const uint32_t thr_hi = rem >> ((ss - 32) & 31);
    const uint32_t thr = sel(ss <= 32, thr_lo, thr_hi);
    up = uint32_t(s > 0) & uint32_t(rnd < thr);
  } else if constexpr (R == Rounding::kNearestEven) {
    up = uint32_t(s > 0) & (uint32_t(rem > half) | (uint32_t(rem == half) & k));
  } else if constexpr (R == Rounding::kTiesAway) {
    up = uint32_t(s > 0) & uint32_t(rem >= half);
  } else {
    up = 0;
  }
  up &= 1u;
  const uint32_t kr = k + up;
  const uint32_t base = uint32_t(bn - 1) << 23;
  // s <= 24 keeps kr << s <= 2^24, where base + significand is the float32 encoding (a carry
  // into the exponent field is the carry into the next binade). s > 24: the result is 0 or
  // one quantum.
  const uint32_t in_binade = sel(kr != 0, base + (kr << sc), 0u);
  uint32_t mag;
  if constexpr (R == Rounding::kStochastic) {
    const uint32_t tiny = sel(up != 0, pow2_bits(q), 0u);
    mag = sel(s <= 0, a, sel(s > 24, tiny, in_binade));
  } else {
    // s > 24 means |x| < 2^(q-1), below half a quantum: the deterministic modes never round
    // it up, and then k = 0 and kr = 0, so in_binade is already the 0 it rounds to.
    mag = sel(s <= 0, a, in_binade);
  }
  mag = sel((mag > g.max_bits) | (a == kInfBits), g.ovf_bits, mag);
  const uint32_t out_sign = sign & sel(mag != 0, 0x80000000u, g.zero_sign);
  return sel(a > kInfBits, sign | kQuietNan, out_sign | mag);
}

// The grid of a plain float format (what quantize() rounds a kFloat format to).
Grid float_grid(const FloatFormat& f);

}  // namespace tb::num::kernel
