// The float-grid rounding kernel shared by the quantizers (quantize.cc) and the MAD unit
// (mad.cc): one element rounded on its float32 bit pattern in integer arithmetic, written
// branch-free so that loops calling it vectorise. Internal to the numerics library.
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/format.h"

// The x86 kernels (target clones here, AVX-512 intrinsics in round_avx512.h, mad.cc's FMA
// instances): x86-64 GCC, unless TB_PORTABLE_KERNELS builds the library without them, as a CPU
// of another architecture compiles it (the test NumericsPortable checks it gives the same bits).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TB_PORTABLE_KERNELS)
#define TB_X86_KERNELS 1
#else
#define TB_X86_KERNELS 0
#endif
// Function multi-versioning: each loop is compiled for AVX-512, AVX2 and baseline x86-64 and
// the loader picks one, so the plain loops below vectorise without -march flags.
#if TB_X86_KERNELS
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

// Round to nearest even with the FPU's own rounding (the default mode) instead of integer
// significand arithmetic: for |x| < 2^(q+23), (|x| + 2^(q+23)) - 2^(q+23) is |x| rounded to
// a multiple of 2^q, ties to even (2^(q+23) is an even multiple of 2^q), and the subtraction
// is exact. About a third of round_bits' instructions. Valid where every quantum q of the grid
// satisfies q >= -125 and q + 23 <= 127 (fast_grid() checks):
// - q >= -125 keeps addend and result normal, so flush-to-zero never applies, and makes a
//   float32 subnormal input, which denormals-are-zero reads as 0, round to 0 either way
//   (|x| < 2^-126 <= 2^(q-1));
// - an input at or past the binade above the largest finite value (exponent >= ecap) takes
//   that binade's quantum: it rounds to at least 2^ecap, past the maximum, so it overflows as
//   it must, and the addend stays finite.
struct FastGrid {
  int emin;      // as Grid
  int man_bits;  // as Grid
  int below;     // the quantum's exponent below emin
  int ecap;      // exponents above this one use its quantum
  uint32_t max_bits, ovf_bits, zero_sign;
  // The same, as float32 exponent fields, for round_nearest_even_fast: 2^emin's and 2^ecap's
  // exponent bits, what takes an exponent field e to 2^(e - man_bits + 23)'s, and the addend
  // 2^(below + 23) itself.
  uint32_t emin_field, ecap_field, to_addend, below_addend;
};

TB_INLINE uint32_t round_nearest_even_fast(uint32_t xb, const FastGrid& g) {
  const uint32_t sign = xb & 0x80000000u;
  const uint32_t a = xb & 0x7FFFFFFFu;
  // The addend 2^(q + 23) from |x|'s exponent field as it stands (q as round_stochastic_fast
  // computes it: min(ex, ecap) - man_bits from emin up, else below), without decoding it.
  const uint32_t e = a & 0x7F800000u;
  const uint32_t capped = sel(e < g.ecap_field, e, g.ecap_field);
  const float c = as_float(sel(e >= g.emin_field, capped + g.to_addend, g.below_addend));
  uint32_t mag = as_bits((as_float(a) + c) - c);
  mag = sel((mag > g.max_bits) | (a == kInfBits), g.ovf_bits, mag);
  const uint32_t out_sign = sign & sel(mag != 0, 0x80000000u, g.zero_sign);
  return sel(a > kInfBits, sign | kQuietNan, out_sign | mag);
}

// Stochastic rounding on a FastGrid's formats, bit-identical to round_bits<kStochastic>: the
// same comparisons with fewer steps, because q >= -125 rules out the cases that need them.
// An input at least one quantum large (s <= 23) keeps its float32 encoding: the low s bits
// are the remainder and adding 2^s to the truncated bits carries into the exponent by itself.
// A smaller one (s > 23, float32 subnormals included) rounds to 0 or 2^q, which is normal.
TB_INLINE uint32_t round_stochastic_fast(uint32_t xb, const FastGrid& g, uint32_t rnd) {
  const uint32_t sign = xb & 0x80000000u;
  const uint32_t a = xb & 0x7FFFFFFFu;
  const int be = int(a >> 23);
  const int ex = be - 127;
  const int q = isel(ex >= g.emin, imin(ex, g.ecap) - g.man_bits, g.below);
  const int s = q - ex + 23;  // past the cap, s <= 0: any result overflows; keep one bit
  const int sc = imin(imax(s, 1), 23);
  const uint32_t mask = (1u << sc) - 1u;
  // Up where the remainder a & mask exceeds the top sc random bits r: then remainder +
  // (mask - r) carries out of the low sc bits (it is at most 2 * mask), else it does not.
  const uint32_t big = (a + (mask - (rnd >> (32 - sc)))) & ~mask;
  // Below one quantum: P(up) = |x| / 2^q = sig / 2^st, to 2^-32 as round_bits.
  const uint32_t mant = a & 0x7FFFFFu;
  const uint32_t sig = mant | sel(be != 0, 0x800000u, 0u);
  const int st = imin(s - int(be == 0), 56);
  const uint32_t thr = sel(st <= 32, sig << ((32 - st) & 31), sig >> ((st - 32) & 31));
  const uint32_t tiny = sel(rnd < thr, uint32_t(q + 127) << 23, 0u);
  uint32_t mag = sel(s > 23, tiny, big);
  mag = sel((mag > g.max_bits) | (a == kInfBits), g.ovf_bits, mag);
  const uint32_t out_sign = sign & sel(mag != 0, 0x80000000u, g.zero_sign);
  return sel(a > kInfBits, sign | kQuietNan, out_sign | mag);
}

// round_stochastic_fast on E2M1's grid (emin 0, one mantissa bit, maximum 6, quanta 0.5, 0.5,
// 1, 2), in about half its operations: NVFP4's stochastic rounding is compute-bound. The same
// bits for every input and random word (checked over all 2^32 inputs when written; the tests
// sample them). From 0.5 up the remainder is the low 23 bits of |x| below 1 and the low 22
// bits from 1 (larger binades overflow however they round); below 0.5 the comparison is
// round_stochastic_fast's threshold, floor(|x| * 2^33), which the product gives exactly.
TB_INLINE uint32_t round_stochastic_e2m1(uint32_t xb, const FastGrid& g, uint32_t rnd) {
  const uint32_t sign = xb & 0x80000000u;
  const uint32_t a = xb & 0x7FFFFFFFu;
  const bool below_one = a < 0x3F800000u, below_half = a < 0x3F000000u;
  const uint32_t mask = sel(below_one, 0x7FFFFFu, 0x3FFFFFu);
  const uint32_t big = (a + (mask - (rnd >> (below_one ? 9 : 10)))) & ~mask;
  // Inputs from 0.5 up are zeroed first, so the product stays below 2^32.
  const uint32_t thr = uint32_t(as_float(a & mask_of(below_half)) * 0x1p33f);
  const uint32_t tiny = sel(rnd < thr, 0x3F000000u, 0u);
  uint32_t mag = sel(below_half, tiny, big);
  mag = sel(mag > g.max_bits, g.ovf_bits, mag);
  const uint32_t out_sign = sign & sel(mag != 0, 0x80000000u, g.zero_sign);
  return sel(a > kInfBits, sign | kQuietNan, out_sign | mag);
}

// Whether `g` passes the conditions above; fills `out` if so.
bool fast_grid(const Grid& g, FastGrid* out);

// Grids whose quantum sits at the same bit of every float32 encoding: float32's exponent range
// with subnormals (emin = -126; bf16 is one). Normal or subnormal, the low s = 23 - man_bits
// bits of |x|'s encoding are the remainder, and a carry out of them is the carry into the next
// binade (or to Inf's encoding, which is past max_bits). Same results as round_bits.
template <Rounding R>
TB_INLINE uint32_t round_bits_shift(uint32_t xb, const Grid& g, uint32_t rnd) {
  const uint32_t sign = xb & 0x80000000u;
  const uint32_t a = xb & 0x7FFFFFFFu;
  const int s = 23 - g.man_bits;
  const uint32_t mask = (1u << s) - 1u, half = 1u << (s - 1);
  uint32_t mag;
  if constexpr (R == Rounding::kStochastic) {
    const uint32_t up = uint32_t((rnd >> (32 - s)) < (a & mask));
    mag = (a & ~mask) + (up << s);
  } else if constexpr (R == Rounding::kNearestEven) {
    mag = (a + (half - 1u) + ((a >> s) & 1u)) & ~mask;
  } else if constexpr (R == Rounding::kTiesAway) {
    mag = (a + half) & ~mask;
  } else {
    mag = a & ~mask;
  }
  mag = sel((mag > g.max_bits) | (a == kInfBits), g.ovf_bits, mag);
  const uint32_t out_sign = sign & sel(mag != 0, 0x80000000u, g.zero_sign);
  return sel(a > kInfBits, sign | kQuietNan, out_sign | mag);
}

TB_INLINE bool shift_grid(const Grid& g) {
  return g.emin == -126 && g.sub == 1 && g.man_bits >= 1 && g.man_bits <= 22;
}

// A grid shift_grid() accepts, for round_bits_shift.
struct ShiftGrid {
  Grid g;
};

// One element on a grid in any of its representations: the overload picks the kernel, so a
// loop written once serves all three (quantize.cc's float and block loops, mad.cc's unit).
template <Rounding R>
TB_INLINE uint32_t round_on(uint32_t x, const Grid& g, uint32_t rnd) {
  return round_bits<R>(x, g, rnd);
}
template <Rounding R>
TB_INLINE uint32_t round_on(uint32_t x, const FastGrid& g, uint32_t rnd) {
  static_assert(R == Rounding::kNearestEven || R == Rounding::kStochastic,
                "the float-add shortcuts round to nearest even or stochastically");
  if constexpr (R == Rounding::kNearestEven) {
    return round_nearest_even_fast(x, g);
  } else {
    return round_stochastic_fast(x, g, rnd);
  }
}
template <Rounding R>
TB_INLINE uint32_t round_on(uint32_t x, const ShiftGrid& g, uint32_t rnd) {
  return round_bits_shift<R>(x, g.g, rnd);
}

// The grid of a plain float format (what quantize() rounds a kFloat format to).
Grid float_grid(const FloatFormat& f);

}  // namespace tb::num::kernel
