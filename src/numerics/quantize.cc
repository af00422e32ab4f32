#include "numerics/quantize.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "base/errors.h"
#include "numerics/round_avx512.h"
#include "numerics/round_bits.h"

namespace tb::num {
namespace {

using namespace kernel;

// The largest magnitude's bits, NaN (bits above Inf's) counted as 0: an integer max, which
// vectorises where std::fmax's calls do not. NaN is masked off rather than selected away:
// GCC 12 leaves the select-then-compare form scalar.
TB_INLINE uint32_t amax_bits_inline(const float* x, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = as_bits(x[i]) & 0x7FFFFFFFu;
    m = std::max(m, a & (0u - uint32_t(a <= kInfBits)));
  }
  return m;
}
TB_NUM_CLONES uint32_t amax_bits(const float* x, size_t n) { return amax_bits_inline(x, n); }

// amax_bits_inline, and whether a NaN was among the elements (into *nan).
TB_INLINE uint32_t amax_bits_nan(const float* x, size_t n, bool* nan) {
  uint32_t m = 0, raw = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = as_bits(x[i]) & 0x7FFFFFFFu;
    m = std::max(m, a & (0u - uint32_t(a <= kInfBits)));
    raw = std::max(raw, a);
  }
  *nan = *nan || raw > kInfBits;
  return m;
}

// Stochastic rounding's generator, keyed by the 64-bit index (seed, offset + i). Within a
// stretch where the index's high word is constant the loops count in 32 bits, which keeps the
// vectorised loop free of 64-bit lanes; the bits drawn are the same.
struct SrKey {
  uint32_t k0, k1;
  explicit SrKey(uint64_t seed)
      : k0(hash32(uint32_t(seed) ^ 0x9e3779b9u)), k1(hash32(uint32_t(seed >> 32) + 0x632be5abu)) {}
  TB_INLINE uint32_t hi(uint64_t idx) const { return uint32_t(idx >> 32) + k1; }
  // One round of the hash: for a given high word, (lo + k0) ^ hi_key is a bijection of the
  // counter, which the hash turns into well-mixed bits; a second round (as before 2026-11-22)
  // cost a sixth of the stochastic quantizer's throughput and decorrelated nothing more.
  TB_INLINE uint32_t bits(uint32_t lo, uint32_t hi_key) const { return hash32((lo + k0) ^ hi_key); }
};

// Elements [i, i + len) of a call whose first element has index `offset` share the high word.
TB_INLINE size_t same_high_word(uint64_t offset, size_t i, size_t n) {
  const uint64_t room = (uint64_t(1) << 32) - ((offset + i) & 0xFFFFFFFFu);
  return size_t(std::min<uint64_t>(n - i, room));
}

// G: the grid's representation (round_on picks the kernel). Scaled: each value is multiplied
// by `scale` before rounding and by `inv` after (a recipe's per-tensor scale), in the same pass.
template <Rounding R, typename G, bool Scaled = false>
TB_INLINE void float_loop(const float* in, float* out, size_t n, const G& grid, uint64_t seed,
                          uint64_t offset, float scale = 1, float inv = 1) {
  const G g = grid;
  const auto pre = [scale](float v) {
    if constexpr (Scaled) return v * scale;
    return v;
  };
  const auto post = [inv](float v) {
    if constexpr (Scaled) return v * inv;
    return v;
  };
  if constexpr (R == Rounding::kStochastic) {
    const SrKey key(seed);
    for (size_t i0 = 0; i0 < n;) {
      const size_t len = same_high_word(offset, i0, n);
      const uint32_t hi = key.hi(offset + i0), lo = uint32_t(offset + i0);
      const float* x = in + i0;
      float* y = out + i0;
      for (size_t i = 0; i < len; ++i)
        y[i] = post(as_float(round_on<R>(as_bits(pre(x[i])), g, key.bits(lo + uint32_t(i), hi))));
      i0 += len;
    }
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = post(as_float(round_on<R>(as_bits(pre(in[i])), g, 0u)));
  }
}

TB_NUM_CLONES void float_rne(const float* in, float* out, size_t n, Grid g, uint64_t s,
                             uint64_t o) {
  float_loop<Rounding::kNearestEven>(in, out, n, g, s, o);
}
TB_NUM_CLONES void float_away(const float* in, float* out, size_t n, Grid g, uint64_t s,
                              uint64_t o) {
  float_loop<Rounding::kTiesAway>(in, out, n, g, s, o);
}
TB_NUM_CLONES void float_rtz(const float* in, float* out, size_t n, Grid g, uint64_t s,
                             uint64_t o) {
  float_loop<Rounding::kTowardZero>(in, out, n, g, s, o);
}
TB_NUM_CLONES void float_sr(const float* in, float* out, size_t n, Grid g, uint64_t s, uint64_t o) {
  float_loop<Rounding::kStochastic>(in, out, n, g, s, o);
}
// The shortcuts' grids (round_bits.h; same results).
TB_NUM_CLONES void float_rne_fast(const float* in, float* out, size_t n, FastGrid g) {
  float_loop<Rounding::kNearestEven>(in, out, n, g, 0, 0);
}
TB_NUM_CLONES void float_sr_fast(const float* in, float* out, size_t n, FastGrid g, uint64_t s,
                                 uint64_t o) {
  float_loop<Rounding::kStochastic>(in, out, n, g, s, o);
}
TB_NUM_CLONES void float_rne_fast_scaled(const float* in, float* out, size_t n, FastGrid g,
                                         float scale, float inv) {
  float_loop<Rounding::kNearestEven, FastGrid, true>(in, out, n, g, 0, 0, scale, inv);
}
TB_NUM_CLONES void float_sr_fast_scaled(const float* in, float* out, size_t n, FastGrid g,
                                        uint64_t s, uint64_t o, float scale, float inv) {
  float_loop<Rounding::kStochastic, FastGrid, true>(in, out, n, g, s, o, scale, inv);
}
TB_NUM_CLONES void float_rne_shift(const float* in, float* out, size_t n, ShiftGrid g) {
  float_loop<Rounding::kNearestEven>(in, out, n, g, 0, 0);
}
TB_NUM_CLONES void float_sr_shift(const float* in, float* out, size_t n, ShiftGrid g, uint64_t s,
                                  uint64_t o) {
  float_loop<Rounding::kStochastic>(in, out, n, g, s, o);
}

#if TB_AVX512_KERNELS
// float_sr_fast with AVX-512 intrinsics: the same bits (SrKey's words, round_stochastic_fast's
// comparisons), in ~60 instructions per 16 elements where GCC's vectorisation of the scalar
// loop takes ~95 (64-bit counters, constants spilled and re-broadcast). Two identities of the
// vector shifts shorten it: a count of 32 or more gives 0, so the threshold's two shifts need
// no select, and the mask of a remainder wider than 23 bits (the value below one quantum,
// where `tiny` is taken instead) need not be clamped. Below one quantum the quantum is the
// grid's smallest (the exponent is below emin), so `tiny` is one constant.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12: _mm512_undefined_* in masks
#pragma GCC diagnostic ignored "-Wuninitialized"  // and in reductions (_mm512_reduce_max_epu32)

// Lines to request while a kernel works through its tiles: p + 16 t for tile t < tiles, one
// 64-byte line per 16-element tile, spread over the loop rather than asked for in a burst
// that fills the line-fill buffers and stalls the loop until they drain.
struct Ahead {
  const float* p = nullptr;
  size_t tiles = 0;
  TB_AVX512_INLINE void line(size_t t) const {
    if (t < tiles) _mm_prefetch(reinterpret_cast<const char*>(p + 16 * t), _MM_HINT_T0);
  }
};

// A FastGrid's constants for round16, broadcast once per call.
struct Sr512 {
  __m512i emin_b, ecap_b, man_b, below_b, tiny_bits, max, ovf, zero_sign;
  __m512i half_bits;  // half the smallest quantum (ties-away's threshold below it)
};

TB_AVX512_INLINE Sr512 sr512(const FastGrid& g) {
  // 2^(below - 1) from its bits: a subnormal at below = -126, and no float arithmetic (FTZ).
  const int half = g.below - 1 + 127;
  const uint32_t half_bits = half >= 1 ? uint32_t(half) << 23 : 1u << (22 + half);
  return {splat(uint32_t(g.emin + 127)),
          splat(uint32_t(g.ecap + 127)),
          splat(uint32_t(23 - g.man_bits)),
          splat(uint32_t(g.below + 150)),
          splat(uint32_t(g.below + 127) << 23),
          splat(g.max_bits),
          splat(g.ovf_bits),
          splat(g.zero_sign),
          splat(half_bits)};
}

// 16 values rounded on the grid stochastically (with the random words r), ties away from zero
// or toward zero: float_sr_fast_avx512's body, which the block kernels share. Above one
// quantum the three differ only in what is added below the quantum before it is cut off.
template <Rounding R, bool NegZero>
TB_AVX512_INLINE __m512 round16(__m512 xv, __m512i r, const Sr512& c) {
  const __m512i abs_mask = splat(0x7FFFFFFFu), mant_mask = splat(0x7FFFFFu);
  const __m512i hidden = splat(0x800000u), one = splat(1);
  const __m512i c23 = splat(23), c32 = splat(32);
  const __m512i xb = _mm512_castps_si512(xv);
  const __m512i a = _mm512_and_si512(xb, abs_mask);
  // s = q - ex + 23 with q as round_stochastic_fast's, from the biased exponent be:
  // min(be, ecap + 127) - be + 23 - man_bits from emin up, else below + 150 - be.
  const __m512i be = _mm512_srli_epi32(a, 23);
  const __mmask16 normal_range = _mm512_cmpge_epi32_mask(be, c.emin_b);
  const __m512i s = _mm512_sub_epi32(
      _mm512_mask_add_epi32(c.below_b, normal_range, _mm512_min_epi32(be, c.ecap_b), c.man_b), be);
  // At or above one quantum (s <= 23): the low sc bits are the remainder.
  const __m512i sc = _mm512_max_epi32(s, one);
  const __m512i shift = _mm512_sub_epi32(c32, sc);
  const __m512i mask = _mm512_srlv_epi32(splat(0xFFFFFFFFu), shift);
  __m512i mag;
  if constexpr (R == Rounding::kStochastic) {
    const __m512i rs = _mm512_srlv_epi32(r, shift);
    mag = _mm512_andnot_si512(mask, _mm512_add_epi32(a, _mm512_sub_epi32(mask, rs)));
  } else if constexpr (R == Rounding::kTiesAway) {  // half a quantum up, then cut
    mag = _mm512_andnot_si512(
        mask, _mm512_add_epi32(a, _mm512_srli_epi32(_mm512_add_epi32(mask, one), 1)));
  } else {
    static_assert(R == Rounding::kTowardZero);
    mag = _mm512_andnot_si512(mask, a);
  }
  // Below one quantum: up with probability |x| / 2^q, as a 32-bit threshold. Rare in a
  // vector (values under the grid's smallest quantum), so computed only where a lane is.
  const __mmask16 below = _mm512_cmpgt_epi32_mask(s, c23);
  if constexpr (R == Rounding::kTiesAway) {  // one quantum from half of it up, else 0
    mag = _mm512_mask_mov_epi32(
        mag, below, _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(a, c.half_bits), c.tiny_bits));
  } else if constexpr (R == Rounding::kTowardZero) {
    mag = _mm512_maskz_mov_epi32(~below, mag);
  } else if (__builtin_expect(below != 0, 0)) {
    const __mmask16 be_zero = _mm512_cmpeq_epi32_mask(be, _mm512_setzero_si512());
    const __m512i mant = _mm512_and_si512(a, mant_mask);
    const __m512i sig = _mm512_mask_or_epi32(mant, ~be_zero, mant, hidden);
    const __m512i st = _mm512_mask_sub_epi32(s, be_zero, s, one);
    const __m512i thr = _mm512_or_si512(_mm512_sllv_epi32(sig, _mm512_sub_epi32(c32, st)),
                                        _mm512_srlv_epi32(sig, _mm512_sub_epi32(st, c32)));
    const __m512i tiny = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(r, thr), c.tiny_bits);
    mag = _mm512_mask_mov_epi32(mag, below, tiny);
  }
  return _mm512_castsi512_ps(finish512_for<NegZero>(mag, xb, a, c.max, c.ovf, c.zero_sign));
}

// R: stochastic, ties away or toward zero (the last two draw nothing).
template <Rounding R, bool Scaled, bool Stream, bool NegZero>
TB_AVX512 void float_fast_avx512(const float* in, float* out, size_t n, const FastGrid& g,
                                 uint64_t seed, uint64_t offset, float scale, float inv) {
  const SrKey key(seed);
  const Sr512 c = sr512(g);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 scale_v = _mm512_set1_ps(scale), inv_v = _mm512_set1_ps(inv);
  for (size_t i0 = 0; i0 < n;) {
    const size_t len = same_high_word(offset, i0, n);
    const __m512i hi = splat(key.hi(offset + i0));
    // SrKey::bits(lo + i, hi) = hash32((lo + i + k0) ^ hi), 16 counters at a time.
    __m512i ctr = _mm512_add_epi32(lane, splat(uint32_t(offset + i0) + key.k0));
    const float* x = in + i0;
    float* y = out + i0;
    for (size_t i = 0; i < len; i += 16) {
      const __mmask16 live = len - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (len - i)) - 1);
      ahead16<Stream>(x + i);
      __m512 xv = _mm512_maskz_loadu_ps(live, x + i);
      if constexpr (Scaled) xv = _mm512_mul_ps(xv, scale_v);
      __m512i r = _mm512_setzero_si512();
      if constexpr (R == Rounding::kStochastic) r = hash32_512(_mm512_xor_si512(ctr, hi));
      ctr = _mm512_add_epi32(ctr, splat(16));
      __m512 outv = round16<R, NegZero>(xv, r, c);
      if constexpr (Scaled) outv = _mm512_mul_ps(outv, inv_v);
      store16<Stream>(y + i, outv, live);
    }
    i0 += len;
  }
}

// float_rne_fast(_scaled) with AVX-512 intrinsics (round_nearest_even_fast512: the same bits),
// so that a streamed output is written by the kernel itself (store16).
template <bool Scaled, bool Stream, bool NegZero>
TB_AVX512 void float_rne_fast_avx512(const float* x, float* y, size_t n, const FastGrid& g,
                                     float scale, float inv) {
  const Fast512 eg = fast512(g);
  const __m512 scale_v = _mm512_set1_ps(scale), inv_v = _mm512_set1_ps(inv);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    ahead16<Stream>(x + i);
    __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    if constexpr (Scaled) v = _mm512_mul_ps(v, scale_v);
    v = round_nearest_even_fast512_for<false, NegZero>(v, eg);
    if constexpr (Scaled) v = _mm512_mul_ps(v, inv_v);
    store16<Stream>(y + i, v, live);
  }
}

// round_bits_shift (grids with float32's exponent range: bf16 and the like) to nearest even or
// stochastically with SrKey's words as float_loop draws them, with AVX-512 intrinsics.
template <Rounding R, bool Stream, bool NegZero>
TB_AVX512 void float_shift_avx512(const float* in, float* out, size_t n, const Grid& g,
                                  uint64_t seed, uint64_t offset) {
  static_assert(R == Rounding::kNearestEven || R == Rounding::kStochastic, "RNE and SR only");
  const SrKey key(seed);
  const int s = 23 - g.man_bits;
  const __m512i abs_mask = splat(0x7FFFFFFFu), keep_mask = splat(~((1u << s) - 1u));
  const __m512i low_mask = splat((1u << s) - 1u), half_less = splat((1u << (s - 1)) - 1u);
  const __m512i one = splat(1), quantum = splat(1u << s);
  const __m512i max = splat(g.max_bits), ovf = splat(g.ovf_bits), zero_sign = splat(g.zero_sign);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (size_t i0 = 0; i0 < n;) {
    const size_t len = R == Rounding::kStochastic ? same_high_word(offset, i0, n) : n;
    const __m512i hi = splat(key.hi(offset + i0));
    __m512i ctr = _mm512_add_epi32(lane, splat(uint32_t(offset + i0) + key.k0));
    const float* x = in + i0;
    float* y = out + i0;
    for (size_t i = 0; i < len; i += 16) {
      const __mmask16 live = len - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (len - i)) - 1);
      ahead16<Stream>(x + i);
      const __m512i xb = _mm512_castps_si512(_mm512_maskz_loadu_ps(live, x + i));
      const __m512i a = _mm512_and_si512(xb, abs_mask);
      __m512i mag;
      if constexpr (R == Rounding::kStochastic) {
        const __m512i r = hash32_512(_mm512_xor_si512(ctr, hi));
        ctr = _mm512_add_epi32(ctr, splat(16));
        const __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(r, unsigned(32 - s)),
                                                     _mm512_and_si512(a, low_mask));
        mag = _mm512_mask_add_epi32(_mm512_and_si512(a, keep_mask), up,
                                    _mm512_and_si512(a, keep_mask), quantum);
      } else {
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, unsigned(s)), one);
        mag = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(a, half_less), odd), keep_mask);
      }
      store16<Stream>(y + i,
                      _mm512_castsi512_ps(finish512_for<NegZero>(mag, xb, a, max, ovf, zero_sign)),
                      live);
    }
    i0 += len;
  }
}

// The first n of 16 lanes.
TB_AVX512_INLINE __mmask16 first_lanes(size_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// fixed_body's k = round_k(x * 2^frac), unclamped, with AVX-512 intrinsics in double (x *
// 2^frac is exact), eight lanes:
//  - to nearest even: the FPU's rounding (ties to even, as round_k) + 0.0, so that a negative
//    value rounding to zero gives +0 as round_k's fl + 0 does;
//  - ties away: the floor plus one where the remainder is above a half, or a half with t >= 0;
//    toward zero: the truncation + 0.0 (t - floor(t) is exact in double);
//  - stochastically: round_k's floor + (r * 2^-32 < remainder), decided exactly, with SrKey's
//    words r as every stochastic kernel draws them; the 1 or +0.0 is always added.
// Inf stays Inf (a NaN remainder: no step); NaN is the caller's.
template <Rounding R>
TB_AVX512_INLINE __m512d fixed_k8(__m256 x, __m256i r, __m512d up) {
  constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
  const __m512d t = _mm512_mul_pd(_mm512_cvtps_pd(x), up), zero = _mm512_setzero_pd();
  if constexpr (R == Rounding::kNearestEven) {
    return _mm512_add_pd(_mm512_roundscale_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                         zero);
  } else if constexpr (R == Rounding::kTowardZero) {
    return _mm512_add_pd(_mm512_roundscale_pd(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), zero);
  } else if constexpr (R == Rounding::kTiesAway) {
    const __m512d fl = _mm512_roundscale_pd(t, kFloor);
    const __m512d d = _mm512_sub_pd(t, fl), half = _mm512_set1_pd(0.5);
    const __mmask8 step =
        _mm512_cmp_pd_mask(d, half, _CMP_GT_OQ) |
        (_mm512_cmp_pd_mask(d, half, _CMP_EQ_OQ) & _mm512_cmp_pd_mask(t, zero, _CMP_GE_OQ));
    return _mm512_add_pd(fl, _mm512_maskz_mov_pd(step, _mm512_set1_pd(1.0)));
  } else {
    static_assert(R == Rounding::kStochastic);
    const __m512d fl = _mm512_roundscale_pd(t, kFloor);
    // round_k's exact decision (its comment): from f = |t| - floor(|t|) and F = f * 2^32.
    const __m512d a = _mm512_abs_pd(t);
    const __m512d f = _mm512_sub_pd(a, _mm512_roundscale_pd(a, kFloor));
    const __m512d big = _mm512_mul_pd(f, _mm512_set1_pd(0x1p32));
    const __mmask8 neg = _mm512_cmp_pd_mask(t, zero, _CMP_LT_OQ);
    const __m256i not_floor_big = _mm256_xor_si256(_mm512_cvttpd_epu32(big), _mm256_set1_epi32(-1));
    const __mmask8 step = (_mm512_cmp_pd_mask(_mm512_cvtepu32_pd(r), big, _CMP_LT_OQ) & ~neg) |
                          (__mmask8(_mm512_cmple_epu32_mask(
                               _mm512_zextsi256_si512(r), _mm512_zextsi256_si512(not_floor_big))) &
                           neg & _mm512_cmp_pd_mask(f, zero, _CMP_GT_OQ));
    return _mm512_add_pd(fl, _mm512_maskz_mov_pd(step, _mm512_set1_pd(1.0)));
  }
}

// fixed_body, saturating: fixed_k8 clamped to [lo, hi] (Inf too), * 2^-frac and narrowed to
// float by the same conversion. NaN becomes lo here; the caller restores it.
template <Rounding R>
TB_AVX512_INLINE __m256 fixed_sat8(__m256 x, __m256i r, __m512d up, __m512d down, __m512d lo,
                                   __m512d hi) {
  const __m512d k = _mm512_min_pd(_mm512_max_pd(fixed_k8<R>(x, r, up), lo), hi);
  return _mm512_cvtpd_ps(_mm512_mul_pd(k, down));
}

// Two's-complement wrap-around: fixed_k8's k - kmin modulo the span (2^w) plus kmin, as
// k - span * floor((k - lo) / span), every step exact while |x * 2^frac| < 2^52 (the caller
// sees to it); Inf goes to the end of its sign. NaN is the caller's.
template <Rounding R>
TB_AVX512_INLINE __m256 fixed_wrap8(__m256 x, __m256i r, __m512d up, __m512d down, __m512d lo,
                                    __m512d hi, __m512d span, __m512d inv_span) {
  const __m512d k = fixed_k8<R>(x, r, up);
  __m512d w = _mm512_sub_pd(
      k, _mm512_mul_pd(span, _mm512_roundscale_pd(_mm512_mul_pd(_mm512_sub_pd(k, lo), inv_span),
                                                  _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)));
  const __mmask8 inf =
      _mm512_cmp_pd_mask(_mm512_abs_pd(k), _mm512_set1_pd(double(INFINITY)), _CMP_EQ_OQ);
  const __mmask8 up_end = _mm512_cmp_pd_mask(k, _mm512_setzero_pd(), _CMP_GT_OQ);
  w = _mm512_mask_mov_pd(w, inf & up_end, hi);
  w = _mm512_mask_mov_pd(w, inf & ~up_end, lo);
  return _mm512_cvtpd_ps(_mm512_mul_pd(w, down));
}

// 16 values on the fixed grid k * 2^-frac as fixed_sat8 rounds them (r: the stochastic words),
// NaN passed through.
template <Rounding R>
TB_AVX512_INLINE __m512 fixed16(__m512 x, __m512i r, __m512d up, __m512d down, __m512d lo,
                                __m512d hi) {
  const __m256 x_hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 y_lo =
      fixed_sat8<R>(_mm512_castps512_ps256(x), _mm512_castsi512_si256(r), up, down, lo, hi);
  const __m256 y_hi = fixed_sat8<R>(x_hi, _mm512_extracti64x4_epi64(r, 1), up, down, lo, hi);
  const __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(
      _mm512_castpd256_pd512(_mm256_castps_pd(y_lo)), _mm256_castps_pd(y_hi), 1));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// fixed16 with two's-complement wrap-around (fixed_wrap8), NaN passed through.
template <Rounding R>
TB_AVX512_INLINE __m512 fixed_wrap16(__m512 x, __m512i r, __m512d up, __m512d down, __m512d lo,
                                     __m512d hi, __m512d span, __m512d inv_span) {
  const __m256 x_hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 y_lo = fixed_wrap8<R>(_mm512_castps512_ps256(x), _mm512_castsi512_si256(r), up, down,
                                     lo, hi, span, inv_span);
  const __m256 y_hi =
      fixed_wrap8<R>(x_hi, _mm512_extracti64x4_epi64(r, 1), up, down, lo, hi, span, inv_span);
  const __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(
      _mm512_castpd256_pd512(_mm256_castps_pd(y_lo)), _mm256_castps_pd(y_hi), 1));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// fixed16 in float32 where that gives the same bits: frac in [0, 126] (2^frac and 2^-frac
// normal floats: x * 2^frac is exact for a normal x and overflows only where the double
// product is clamped anyway; a subnormal x is exact too, or 0 under DAZ in both) and |k| at
// most 2^24 (every k, and k * 2^-frac, exact in float32). Nearest even: the same roundscale on
// t. Stochastic: round_k's exact decision, r < ceil(F) for t >= 0 (F = f * 2^32 and f = |t| -
// floor(|t|), both exact in float32) and r <= ~floor(F) for t < 0 with f > 0. Half the
// instructions of the double form. (With FTZ but not DAZ, a subnormal x whose t is below
// 2^-126 flushes here and not in double: a 2^-32 chance of a different step; trainbench sets
// both.)
inline bool fixed_in_float(int frac, double kmin, double kmax) {
  return frac >= 0 && frac <= 126 && kmin >= -0x1p24 && kmax <= 0x1p24;
}

template <Rounding R>
TB_AVX512_INLINE __m512 fixed_k16f(__m512 x, __m512i r, __m512 up) {
  const __m512 t = _mm512_mul_ps(x, up), zero = _mm512_setzero_ps();
  if constexpr (R == Rounding::kStochastic) {
    constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    const __m512 fl = _mm512_roundscale_ps(t, kFloor);
    const __m512 a = _mm512_abs_ps(t);
    const __m512 f = _mm512_sub_ps(a, _mm512_roundscale_ps(a, kFloor));
    const __m512 big = _mm512_mul_ps(f, _mm512_set1_ps(0x1p32f));
    const __m512i ceil_big =
        _mm512_cvtps_epu32(_mm512_roundscale_ps(big, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
    const __m512i not_floor_big = _mm512_xor_si512(_mm512_cvttps_epu32(big), splat(0xFFFFFFFFu));
    const __mmask16 neg = _mm512_cmp_ps_mask(t, zero, _CMP_LT_OQ);
    const __mmask16 step =
        (_mm512_cmplt_epu32_mask(r, ceil_big) & ~neg) |
        (_mm512_cmple_epu32_mask(r, not_floor_big) & neg & _mm512_cmp_ps_mask(f, zero, _CMP_GT_OQ));
    return _mm512_add_ps(fl, _mm512_maskz_mov_ps(step, _mm512_set1_ps(1.0f)));
  } else if constexpr (R == Rounding::kNearestEven) {
    return _mm512_add_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                         zero);
  } else if constexpr (R == Rounding::kTowardZero) {
    return _mm512_add_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), zero);
  } else {  // ties away, as fixed_k8: t - floor(t) is exact in float32 too
    static_assert(R == Rounding::kTiesAway);
    const __m512 fl = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 d = _mm512_sub_ps(t, fl), half = _mm512_set1_ps(0.5f);
    const __mmask16 step =
        _mm512_cmp_ps_mask(d, half, _CMP_GT_OQ) |
        (_mm512_cmp_ps_mask(d, half, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(t, zero, _CMP_GE_OQ));
    return _mm512_add_ps(fl, _mm512_maskz_mov_ps(step, _mm512_set1_ps(1.0f)));
  }
}

template <Rounding R>
TB_AVX512_INLINE __m512 fixed16f(__m512 x, __m512i r, __m512 up, __m512 down, __m512 lo,
                                 __m512 hi) {
  const __m512 k = _mm512_min_ps(_mm512_max_ps(fixed_k16f<R>(x, r, up), lo), hi);  // NaN: lo
  return _mm512_mask_mov_ps(_mm512_mul_ps(k, down), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// fixed_wrap16 in float32, where fixed_in_float allows and every |x * 2^frac| of the vector is
// below 2^23 (the caller checks): k - kmin is then below 2^24 in magnitude and the remainder's
// every step is exact in float32 as in double (the span a power of two up to 2^24). Finite
// lanes only (Inf: the double form); NaN passed through.
template <Rounding R>
TB_AVX512_INLINE __m512 fixed_wrap16f(__m512 x, __m512i r, __m512 up, __m512 down, __m512 lo,
                                      __m512 span, __m512 inv_span) {
  const __m512 k = fixed_k16f<R>(x, r, up);
  const __m512 w = _mm512_sub_ps(
      k, _mm512_mul_ps(span, _mm512_roundscale_ps(_mm512_mul_ps(_mm512_sub_ps(k, lo), inv_span),
                                                  _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)));
  return _mm512_mask_mov_ps(_mm512_mul_ps(w, down), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// The saturating fixed-point loop, in any mode (stochastically with SrKey's words), in
// float32 where fixed_in_float allows, else in double. Wrap: two's-complement wrap-around
// instead (fixed_wrap16, in double; every |x * 2^frac| below 2^52), in any mode.
float fixed_wrap_huge(float x, uint64_t index, int frac, int64_t kmin, int64_t kmax, Rounding r,
                      uint64_t seed);

template <Rounding R, bool Stream, bool Float, bool Wrap = false>
TB_AVX512 void fixed_loop_avx512(const float* in, float* out, size_t n, int frac, double kmin,
                                 double kmax, uint64_t seed, uint64_t offset) {
  // Wrap: the magnitudes from which x * 2^frac reaches 2^52, where fixed_wrap8 is not exact,
  // and (Float) below which a vector can take fixed_wrap16f (2^23).
  const __m512 huge_from = _mm512_set1_ps(std::ldexp(1.0f, 52 - frac));
  const __m512 small_below = _mm512_set1_ps(std::ldexp(1.0f, Float ? 23 - frac : 0));
  const __m512 inf_ps = _mm512_set1_ps(INFINITY);
  const __m512 spanf = _mm512_set1_ps(float(kmax - kmin + 1));
  const __m512 inv_spanf = _mm512_set1_ps(float(1 / (kmax - kmin + 1)));
  const SrKey key(seed);
  const __m512d up = _mm512_set1_pd(std::ldexp(1.0, frac));
  const __m512d down = _mm512_set1_pd(std::ldexp(1.0, -frac));
  const __m512d lo = _mm512_set1_pd(kmin), hi = _mm512_set1_pd(kmax);
  const __m512d span = _mm512_set1_pd(kmax - kmin + 1),
                inv_span = _mm512_set1_pd(1 / (kmax - kmin + 1));
  const __m512 upf = _mm512_set1_ps(std::ldexp(1.0f, Float ? frac : 0));
  const __m512 downf = _mm512_set1_ps(std::ldexp(1.0f, Float ? -frac : 0));
  const __m512 lof = _mm512_set1_ps(float(kmin)), hif = _mm512_set1_ps(float(kmax));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (size_t i0 = 0; i0 < n;) {
    const size_t len = R == Rounding::kStochastic ? same_high_word(offset, i0, n) : n - i0;
    const __m512i hk = splat(key.hi(offset + i0));
    __m512i ctr = _mm512_add_epi32(lane, splat(uint32_t(offset + i0) + key.k0));
    for (size_t i = 0; i < len; i += 16) {
      const __mmask16 live = first_lanes(len - i);
      __m512i r = _mm512_setzero_si512();
      if constexpr (R == Rounding::kStochastic) r = hash32_512(_mm512_xor_si512(ctr, hk));
      ctr = _mm512_add_epi32(ctr, splat(16));
      ahead16<Stream>(in + i0 + i);
      const __m512 x = _mm512_maskz_loadu_ps(live, in + i0 + i);
      if constexpr (Wrap) {
        if constexpr (Float) {
          const __mmask16 small =
              _mm512_cmp_ps_mask(_mm512_abs_ps(x), small_below, _CMP_LT_OQ);  // NaN: no
          if ((small & live) == live) {
            store16<Stream>(out + i0 + i, fixed_wrap16f<R>(x, r, upf, downf, lof, spanf, inv_spanf),
                            live);
            continue;
          }
        }
        store16<Stream>(out + i0 + i, fixed_wrap16<R>(x, r, up, down, lo, hi, span, inv_span),
                        live);
        const __m512 a = _mm512_abs_ps(x);
        const __mmask16 huge = live & _mm512_cmp_ps_mask(a, huge_from, _CMP_GE_OQ) &
                               _mm512_cmp_ps_mask(a, inf_ps, _CMP_NEQ_UQ);
        if (__builtin_expect(huge != 0, 0)) {  // those lanes again, one at a time (fmod)
          alignas(64) float xs[16];
          _mm512_store_ps(xs, x);
          for (size_t j = 0; j < 16; ++j)
            if ((huge >> j) & 1u)
              out[i0 + i + j] = fixed_wrap_huge(xs[j], offset + i0 + i + j, frac, int64_t(kmin),
                                                int64_t(kmax), R, seed);
        }
      } else if constexpr (Float)
        store16<Stream>(out + i0 + i, fixed16f<R>(x, r, upf, downf, lof, hif), live);
      else
        store16<Stream>(out + i0 + i, fixed16<R>(x, r, up, down, lo, hi), live);
    }
    i0 += len;
  }
}

// fixed_loop_avx512's wrap-around instances.
void fixed_wrap512(const float* in, float* out, size_t n, int frac, double kmin, double kmax,
                   Rounding r, uint64_t seed, uint64_t offset, bool stream) {
  const bool f = fixed_in_float(frac, kmin, kmax);
  const auto run = [&](auto mode) {
    constexpr Rounding kR = decltype(mode)::value;
    if (stream && f)
      return fixed_loop_avx512<kR, true, true, true>(in, out, n, frac, kmin, kmax, seed, offset);
    if (stream)
      return fixed_loop_avx512<kR, true, false, true>(in, out, n, frac, kmin, kmax, seed, offset);
    if (f)
      return fixed_loop_avx512<kR, false, true, true>(in, out, n, frac, kmin, kmax, seed, offset);
    fixed_loop_avx512<kR, false, false, true>(in, out, n, frac, kmin, kmax, seed, offset);
  };
  using NE = std::integral_constant<Rounding, Rounding::kNearestEven>;
  using TA = std::integral_constant<Rounding, Rounding::kTiesAway>;
  using TZ = std::integral_constant<Rounding, Rounding::kTowardZero>;
  using SR = std::integral_constant<Rounding, Rounding::kStochastic>;
  r == Rounding::kNearestEven  ? run(NE{})
  : r == Rounding::kTiesAway   ? run(TA{})
  : r == Rounding::kTowardZero ? run(TZ{})
                               : run(SR{});
}

template <Rounding R>
void fixed512(const float* in, float* out, size_t n, int frac, double kmin, double kmax,
              uint64_t seed, uint64_t offset, bool stream) {
  const bool f = fixed_in_float(frac, kmin, kmax);
  if (stream && f)
    return fixed_loop_avx512<R, true, true>(in, out, n, frac, kmin, kmax, seed, offset);
  if (stream) return fixed_loop_avx512<R, true, false>(in, out, n, frac, kmin, kmax, seed, offset);
  if (f) return fixed_loop_avx512<R, false, true>(in, out, n, frac, kmin, kmax, seed, offset);
  fixed_loop_avx512<R, false, false>(in, out, n, frac, kmin, kmax, seed, offset);
}

// amax_bits over an array read from memory, with AVX-512 intrinsics and each load requested
// 4 KiB ahead: a read-only pass is bound by how many lines one core has in flight. On one core
// of a Xeon VM, 1 KiB ahead read 9.8-12.4 GB/s where amax_bits read 9.1-10.6 (three runs each);
// on both cores, medians of 12 interleaved runs of 512 MiB: 17.4 GB/s 1 KiB ahead, 19.4 at
// 4 KiB, 19.6 at 8 KiB. Current scaling and NVFP4 read their input twice: this pass, then the
// rounding.
TB_AVX512 uint32_t amax_bits_ahead512(const float* x, size_t n) {
  const __m512i abs_mask = splat(0x7FFFFFFFu), inf = splat(kInfBits);
  __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(x + i + 1024), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(x + i + 1040), _MM_HINT_T0);
    const __m512i a0 = _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask);
    const __m512i a1 = _mm512_and_si512(_mm512_loadu_si512(x + i + 16), abs_mask);
    // NaN (above Inf's bits) is left out, as amax_bits does
    m0 = _mm512_mask_max_epu32(m0, _mm512_cmple_epu32_mask(a0, inf), m0, a0);
    m1 = _mm512_mask_max_epu32(m1, _mm512_cmple_epu32_mask(a1, inf), m1, a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + i), abs_mask);
    m0 = _mm512_mask_max_epu32(m0, _mm512_cmple_epu32_mask(a, inf), m0, a);
  }
  return uint32_t(_mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1)));
}

// NVFP4's tile scales, 16 tiles at a time (nvfp4_serial's scalar loop, the same float32
// operations in the same order): the E4M3 decode scale of amax * k, rounded to nearest even
// and saturated, and the encode scale 1 / (decode * s_dec), at most FLT_MAX. Per tile of 16
// elements the scalar loop's division and rounding cost as much as the tile's own rounding.
TB_AVX512 void nvfp4_scales512(const uint32_t* amax, float* enc, float* dec, size_t tiles, float k,
                               float s_dec, const FastGrid& scale) {
  const Fast512 g = fast512(scale);
  const __m512 kv = _mm512_set1_ps(k), sd = _mm512_set1_ps(s_dec), one = _mm512_set1_ps(1.0f);
  const __m512 flt_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  for (size_t t = 0; t < tiles; t += 16) {
    const __mmask16 live = tiles - t >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (tiles - t)) - 1);
    const __m512 a = _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(live, amax + t));
    const __m512 sb = round_nearest_even_fast512<false>(_mm512_mul_ps(a, kv), g);
    const __m512 e0 = _mm512_div_ps(one, _mm512_mul_ps(sb, sd));
    _mm512_mask_storeu_ps(
        enc + t, live,
        _mm512_mask_mov_ps(flt_max, _mm512_cmp_ps_mask(e0, flt_max, _CMP_LE_OQ), e0));
    _mm512_mask_storeu_ps(dec + t, live, sb);
  }
}

// round16<kTiesAway> on E2M1's grid (nvfp4_grids checks it: emin 0, one mantissa bit, max 6),
// its constants known: half a quantum added and the remainder cut, the quantum 0.5 below 1
// (the low 23 bits) and 2^(e-1) from 1 up (the low 22); below 0.5, 0.5 from 0.25 up, else 0.
// Half round16's instructions, which derive the quantum from the exponent for any grid.
template <bool NegZero>
TB_AVX512_INLINE __m512 e2m1_away16(__m512 v, const Sr512& c) {
  const __m512i xb = _mm512_castps_si512(v);
  const __m512i a = _mm512_and_si512(xb, splat(0x7FFFFFFFu));
  const __mmask16 below_one = _mm512_cmplt_epu32_mask(a, splat(0x3F800000u));
  const __mmask16 below_half = _mm512_cmplt_epu32_mask(a, splat(0x3F000000u));
  const __m512i mask = _mm512_mask_mov_epi32(splat(0x3FFFFFu), below_one, splat(0x7FFFFFu));
  const __m512i half = _mm512_mask_mov_epi32(splat(1u << 21), below_one, splat(1u << 22));
  __m512i mag = _mm512_andnot_si512(mask, _mm512_add_epi32(a, half));
  const __m512i tiny =
      _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(a, splat(0x3E800000u)), splat(0x3F000000u));
  mag = _mm512_mask_mov_epi32(mag, below_half, tiny);
  return _mm512_castsi512_ps(finish512_for<NegZero>(mag, xb, a, c.max, c.ovf, c.zero_sign));
}

// round_nearest_even_fast512_signed on E2M1's grid (nvfp4_grids checks it: emin 0, one
// mantissa bit, -0, saturating at 6), its constants known. |v| is first clamped to 6 (Inf too;
// a NaN's bits too, put back below): everything above 6 rounds to 6 anyway (7, the tie, to 8,
// then saturated), and the clamp leaves E = floor(log2 |v|) at most 2, so only its lower bound
// needs clamping. The quantum is 2^(E-1) for E clamped to [0, 2] (0.5 below 2, the
// subnormals' too; 1 in [2, 4); 2 from 4 up), so (|v| + c) - c with c = 2^(E+22) rounds |v| to
// it, ties to even (an even multiple of the quantum is an even mantissa). A NaN becomes the
// quiet NaN unless Finite (the caller saw none). 8 instructions (10) where the grid's general
// form takes 13.
template <bool Finite>
TB_AVX512_INLINE __m512 e2m1_rne16(__m512 v) {
  const __m512i xb = _mm512_castps_si512(v);
  const __m512i a = _mm512_min_epu32(_mm512_and_si512(xb, splat(0x7FFFFFFFu)), splat(0x40C00000u));
  const __m512i e = _mm512_and_si512(a, splat(kInfBits));
  const __m512 c = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_max_epu32(e, splat(0x3F800000u)), splat(22u << 23)));
  __m512 mag = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), c), c);
  if constexpr (!Finite)
    mag = _mm512_mask_mov_ps(mag, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                             _mm512_castsi512_ps(splat(kQuietNan)));
  // x's sign back, on zeros and NaN too
  return _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(mag), xb, splat(0x80000000u), 0xF8));
}

// NVFP4's tiles (nvfp4_serial's loop: x * enc, rounded on E2M1's grid, * dec * s_dec), one
// 16-element tile per vector: to nearest even (e2m1_rne16, bit-identical to round_bits on this
// grid; Finite: no NaN among the tiles), ties away or toward zero (round16, as run_grid takes
// them). Returns the tiles done.
template <Rounding R, bool Stream, bool NegZero, bool Finite = false>
TB_AVX512 size_t nvfp4_tiles_avx512(const float* x, float* y, size_t tiles, const float* enc,
                                    const float* dec, float s_dec, const FastGrid& g,
                                    const Ahead& ahead) {
  const Fast512 eg = fast512(g);
  const Sr512 c = sr512(g);
  const __m512 s_dec_v = _mm512_set1_ps(s_dec);
  for (size_t t = 0; t < tiles; ++t) {
    ahead.line(t);
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * t), _mm512_set1_ps(enc[t]));
    __m512 q;
    if constexpr (R == Rounding::kNearestEven && NegZero)
      q = e2m1_rne16<Finite>(v);
    else if constexpr (R == Rounding::kNearestEven)
      q = round_nearest_even_fast512_for<false, NegZero>(v, eg);
    else if constexpr (R == Rounding::kTiesAway)
      q = e2m1_away16<NegZero>(v, c);
    else
      q = round16<R, NegZero>(v, _mm512_setzero_si512(), c);
    store16<Stream>(y + 16 * t, _mm512_mul_ps(_mm512_mul_ps(q, _mm512_set1_ps(dec[t])), s_dec_v),
                    0xFFFF);
  }
  return tiles;
}

size_t nvfp4_rne_tiles512(const float* x, float* y, size_t tiles, const float* enc,
                          const float* dec, float s_dec, const FastGrid& g, bool stream,
                          bool finite, const Ahead& ahead) {
  return with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    if (finite)
      return nvfp4_tiles_avx512<Rounding::kNearestEven, st.value, nz.value, true>(
          x, y, tiles, enc, dec, s_dec, g, ahead);
    return nvfp4_tiles_avx512<Rounding::kNearestEven, st.value, nz.value>(x, y, tiles, enc, dec,
                                                                          s_dec, g, ahead);
  });
}

void nvfp4_directed_tiles512(const float* x, float* y, size_t tiles, const float* enc,
                             const float* dec, float s_dec, const FastGrid& g, Rounding r,
                             bool stream, const Ahead& ahead) {
  with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    if (r == Rounding::kTiesAway)
      nvfp4_tiles_avx512<Rounding::kTiesAway, st.value, nz.value>(x, y, tiles, enc, dec, s_dec, g,
                                                                  ahead);
    else
      nvfp4_tiles_avx512<Rounding::kTowardZero, st.value, nz.value>(x, y, tiles, enc, dec, s_dec, g,
                                                                    ahead);
  });
}

// NVFP4's stochastic tiles (nvfp4_serial's loop: x * enc, round_stochastic_e2m1 with SrKey's
// word for the element, * dec * s_dec), one 16-element tile per vector, in ~45 instructions
// where GCC's loop takes ~60. `base`: the row's first counter plus SrKey::k0; `hi`: its high
// key. Finite: no NaN among the tiles (their NaN check goes). Returns the tiles done (all).
template <bool Stream, bool NegZero, bool Finite>
TB_AVX512 size_t nvfp4_sr_tiles_avx512(const float* x, float* y, size_t tiles, const float* enc,
                                       const float* dec, float s_dec, uint32_t base, uint32_t hi,
                                       const FastGrid& g, const Ahead& ahead) {
  const __m512i abs_mask = splat(0x7FFFFFFFu), one_bits = splat(0x3F800000u);
  const __m512i half_bits = splat(0x3F000000u), m23 = splat(0x7FFFFFu);
  const __m512i m22 = splat(0x3FFFFFu), sh9 = splat(9), sh10 = splat(10);
  const __m512i max = splat(g.max_bits);
  const __m512i zero_sign = splat(g.zero_sign), sign_bit = splat(0x80000000u);
  const __m512i inf = splat(kInfBits), qnan = splat(kQuietNan);
  const __m512i hv = splat(hi);
  const __m512 two33 = _mm512_set1_ps(0x1p33f), s_dec_v = _mm512_set1_ps(s_dec);
  __m512i ctr = _mm512_add_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), splat(base));
  for (size_t t = 0; t < tiles; ++t) {
    ahead.line(t);
    const __m512i r = hash32_512(_mm512_xor_si512(ctr, hv));
    ctr = _mm512_add_epi32(ctr, splat(16));
    const __m512i xb =
        _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * t), _mm512_set1_ps(enc[t])));
    const __m512i a = _mm512_and_si512(xb, abs_mask);
    const __mmask16 below_one = _mm512_cmplt_epu32_mask(a, one_bits);
    const __mmask16 below_half = _mm512_cmplt_epu32_mask(a, half_bits);
    const __m512i mask = _mm512_mask_mov_epi32(m22, below_one, m23);
    const __m512i rs = _mm512_srlv_epi32(r, _mm512_mask_mov_epi32(sh10, below_one, sh9));
    const __m512i big = _mm512_andnot_si512(mask, _mm512_add_epi32(a, _mm512_sub_epi32(mask, rs)));
    // Lanes from 0.5 up (NaN too) convert out of range, to 0xFFFFFFFF with the invalid
    // exception masked (MXCSR's default; only its sticky flag is set), and take `big`: the
    // scalar form's zeroing of them first is not needed here.
    const __m512i thr = _mm512_cvttps_epu32(_mm512_mul_ps(_mm512_castsi512_ps(a), two33));
    const __m512i tiny = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(r, thr), half_bits);
    // E2M1 saturates (nvfp4_grids checks that ovf is max): the overflow is a minimum.
    __m512i mag = _mm512_min_epu32(_mm512_mask_mov_epi32(big, below_half, tiny), max);
    __m512i res;
    if constexpr (NegZero) {  // finish512_signed's tail
      if constexpr (!Finite)
        mag = _mm512_mask_mov_epi32(mag, _mm512_cmpgt_epu32_mask(a, inf), qnan);
      res = _mm512_ternarylogic_epi32(mag, xb, sign_bit, 0xF8);
    } else {
      const __m512i sign = _mm512_xor_si512(xb, a);
      const __m512i keep =
          _mm512_mask_mov_epi32(zero_sign, _mm512_test_epi32_mask(mag, mag), sign_bit);
      res = _mm512_or_si512(mag, _mm512_and_si512(sign, keep));
      if constexpr (!Finite)
        res = _mm512_mask_mov_epi32(res, _mm512_cmpgt_epu32_mask(a, inf),
                                    _mm512_or_si512(sign, qnan));
    }
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(res), _mm512_set1_ps(dec[t]));
    store16<Stream>(y + 16 * t, _mm512_mul_ps(v, s_dec_v), 0xFFFF);
  }
  return tiles;
}
#pragma GCC diagnostic pop
#endif

#if TB_AVX512_KERNELS
// The AVX-512 kernels' instances: streamed or not, and the signed forms on grids with -0.
size_t nvfp4_sr_tiles512(const float* x, float* y, size_t tiles, const float* enc, const float* dec,
                         float s_dec, uint32_t base, uint32_t hi, const FastGrid& g, bool stream,
                         bool finite, const Ahead& ahead) {
  assert(g.ovf_bits == g.max_bits);  // the kernel's overflow is a minimum
  return with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    if (finite)
      return nvfp4_sr_tiles_avx512<st.value, nz.value, true>(x, y, tiles, enc, dec, s_dec, base, hi,
                                                             g, ahead);
    return nvfp4_sr_tiles_avx512<st.value, nz.value, false>(x, y, tiles, enc, dec, s_dec, base, hi,
                                                            g, ahead);
  });
}
template <bool Scaled>
void sr_fast512(const float* in, float* out, size_t n, const FastGrid& g, uint64_t seed,
                uint64_t offset, float scale, float inv, bool stream) {
  with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    float_fast_avx512<Rounding::kStochastic, Scaled, st.value, nz.value>(in, out, n, g, seed,
                                                                         offset, scale, inv);
  });
}
template <Rounding R>
void directed_fast512(const float* in, float* out, size_t n, const FastGrid& g, bool stream) {
  with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    float_fast_avx512<R, false, st.value, nz.value>(in, out, n, g, 0, 0, 1, 1);
  });
}
template <Rounding R>
void shift512(const float* in, float* out, size_t n, const Grid& g, uint64_t seed, uint64_t offset,
              bool stream) {
  with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    float_shift_avx512<R, st.value, nz.value>(in, out, n, g, seed, offset);
  });
}
template <bool Scaled>
void rne_fast512(const float* in, float* out, size_t n, const FastGrid& g, float scale, float inv,
                 bool stream) {
  with_instance(stream, g.zero_sign, [&](auto st, auto nz) {
    float_rne_fast_avx512<Scaled, st.value, nz.value>(in, out, n, g, scale, inv);
  });
}
#endif

// float_sr_fast(_scaled) and float_rne_fast(_scaled), on the AVX-512 kernels where the CPU has
// them; `stream`: the output is past the caches (quantize_streaming), written with store16.
void sr_fast(const float* in, float* out, size_t n, const FastGrid& g, uint64_t seed,
             uint64_t offset, bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return sr_fast512<false>(in, out, n, g, seed, offset, 1, 1, stream);
#endif
  float_sr_fast(in, out, n, g, seed, offset);
}
void sr_fast_scaled(const float* in, float* out, size_t n, const FastGrid& g, uint64_t seed,
                    uint64_t offset, float scale, float inv, bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return sr_fast512<true>(in, out, n, g, seed, offset, scale, inv, stream);
#endif
  float_sr_fast_scaled(in, out, n, g, seed, offset, scale, inv);
}
void shift_rne(const float* in, float* out, size_t n, const Grid& g, bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return shift512<Rounding::kNearestEven>(in, out, n, g, 0, 0, stream);
#endif
  float_rne_shift(in, out, n, ShiftGrid{g});
}
void shift_sr(const float* in, float* out, size_t n, const Grid& g, uint64_t seed, uint64_t offset,
              bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return shift512<Rounding::kStochastic>(in, out, n, g, seed, offset, stream);
#endif
  float_sr_shift(in, out, n, ShiftGrid{g}, seed, offset);
}
void rne_fast(const float* in, float* out, size_t n, const FastGrid& g, bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return rne_fast512<false>(in, out, n, g, 1, 1, stream);
#endif
  float_rne_fast(in, out, n, g);
}
void rne_fast_scaled(const float* in, float* out, size_t n, const FastGrid& g, float scale,
                     float inv, bool stream) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return rne_fast512<true>(in, out, n, g, scale, inv, stream);
#endif
  float_rne_fast_scaled(in, out, n, g, scale, inv);
}

// `stream`: as sr_fast's (the kernels without an AVX-512 form store plainly).
void run_grid(const float* in, float* out, size_t n, const Grid& g, Rounding r, uint64_t seed,
              uint64_t offset, bool stream = false) {
  switch (r) {
    case Rounding::kNearestEven: {
      FastGrid fg;
      if (fast_grid(g, &fg)) return rne_fast(in, out, n, fg, stream);
      if (shift_grid(g)) return shift_rne(in, out, n, g, stream);
      return float_rne(in, out, n, g, seed, offset);
    }
    case Rounding::kTiesAway: {
#if TB_AVX512_KERNELS
      FastGrid fg;
      if (avx512_cpu() && fast_grid(g, &fg))
        return directed_fast512<Rounding::kTiesAway>(in, out, n, fg, stream);
#endif
      return float_away(in, out, n, g, seed, offset);
    }
    case Rounding::kTowardZero: {
#if TB_AVX512_KERNELS
      FastGrid fg;
      if (avx512_cpu() && fast_grid(g, &fg))
        return directed_fast512<Rounding::kTowardZero>(in, out, n, fg, stream);
#endif
      return float_rtz(in, out, n, g, seed, offset);
    }
    case Rounding::kStochastic: {
      FastGrid fg;
      if (fast_grid(g, &fg)) return sr_fast(in, out, n, fg, seed, offset, stream);
      if (shift_grid(g)) return shift_sr(in, out, n, g, seed, offset, stream);
      return float_sr(in, out, n, g, seed, offset);
    }
  }
}

// Bits of the largest float32 <= v (v >= 0), without float arithmetic on subnormals: callers
// may run with flush-to-zero and denormals-are-zero set (trainbench's runtime does).
uint32_t float_bits_of(double v) {
  if (v >= 0x1p-126) {
    uint32_t b = as_bits(float(v));
    if (double(as_float(b)) > v) --b;
    return b;
  }
  return uint32_t(std::ldexp(v, 149));
}

// The grid of `f` scaled by 2^scale (block formats); scale 0 for a plain float format.
Grid make_grid(const FloatFormat& f, int scale, bool saturate) {
  Grid g;
  g.emin = f.emin() + scale;
  g.man_bits = f.man_bits;
  g.sub = f.subnormals ? 1 : 0;
  const double mx = std::ldexp(f.max_finite(), scale);
  // A scaled maximum below float32's subnormals cannot be exceeded by a value on the grid.
  g.max_bits = mx > 3.4028234663852886e38 ? 0x7F7FFFFFu : float_bits_of(mx);
  if (saturate || f.overflow == Overflow::kSaturate)
    g.ovf_bits = g.max_bits;
  else
    g.ovf_bits = f.has_inf() ? kInfBits : kQuietNan;
  g.zero_sign = f.special == Special::kFnuz ? 0u : 0x80000000u;
  return g;
}

// Fixed point on the grid k * 2^-frac, in double: x * 2^frac is exact there, and so is every
// step after it. Saturating; wrap-around is done afterwards (rare, not vectorised).
template <Rounding R>
TB_INLINE double round_k(double t, uint32_t rnd) {
  const double fl = std::floor(t), d = t - fl;
  if constexpr (R == Rounding::kNearestEven) {
    const double odd = fl - 2.0 * std::floor(fl * 0.5);
    return fl + double((d > 0.5) | ((d == 0.5) & (odd == 1.0)));
  } else if constexpr (R == Rounding::kTiesAway) {
    return fl + double((d > 0.5) | ((d == 0.5) & (t >= 0)));
  } else if constexpr (R == Rounding::kTowardZero) {
    return std::trunc(t) + 0.0;  // +0 from a negative value, as the other modes (no -0 in k)
  } else {
    // Up where r * 2^-32 < t - floor(t), decided exactly: for a negative t of magnitude under
    // about 2^-29, t - floor(t) = 1 - |t| has more bits than a double. From f = |t| -
    // floor(|t|) and F = f * 2^32 (both exact): r < F for t >= 0, r < 2^32 - F (r <= ~floor(F))
    // for t < 0 with f > 0. Inf and NaN leave f NaN: no step.
    const double a = std::fabs(t), f = a - std::floor(a), big = f * 0x1p32;
    if (t >= 0) return fl + double(double(rnd) < big);
    if (!(f > 0)) return fl;
    return fl + double(rnd <= ~uint32_t(big));
  }
}

template <Rounding R>
TB_INLINE void fixed_body(const float* in, float* out, size_t n, int frac, double kmin, double kmax,
                          uint64_t seed, uint64_t offset) {
  const double up_scale = std::ldexp(1.0, frac), down_scale = std::ldexp(1.0, -frac);
  // SrKey's words, as every other stochastic kernel and the wrap-around loop draw them (until
  // 2026-11-27 this loop drew a two-round hash of its own, so fixed point with and without
  // saturation rounded the same in-range value differently).
  const SrKey key(seed);
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const double t = double(x) * up_scale;
    uint32_t rnd = 0;
    if constexpr (R == Rounding::kStochastic) {
      const uint64_t idx = offset + i;
      rnd = key.bits(uint32_t(idx), key.hi(idx));
    }
    double k = round_k<R>(t, rnd);
    // Inf: fl is Inf and d NaN, so k stays Inf and is clamped like any large value.
    k = k < kmin ? kmin : k;
    k = k > kmax ? kmax : k;
    const float y = float(k * down_scale);
    out[i] = x != x ? x : y;
  }
}

TB_NUM_CLONES TB_NUM_NO_TRAPS void fixed_rne(const float* in, float* out, size_t n, int f,
                                             double lo, double hi, uint64_t s, uint64_t o) {
  fixed_body<Rounding::kNearestEven>(in, out, n, f, lo, hi, s, o);
}
TB_NUM_CLONES TB_NUM_NO_TRAPS void fixed_away(const float* in, float* out, size_t n, int f,
                                              double lo, double hi, uint64_t s, uint64_t o) {
  fixed_body<Rounding::kTiesAway>(in, out, n, f, lo, hi, s, o);
}
TB_NUM_CLONES TB_NUM_NO_TRAPS void fixed_rtz(const float* in, float* out, size_t n, int f,
                                             double lo, double hi, uint64_t s, uint64_t o) {
  fixed_body<Rounding::kTowardZero>(in, out, n, f, lo, hi, s, o);
}
TB_NUM_CLONES TB_NUM_NO_TRAPS void fixed_sr(const float* in, float* out, size_t n, int f, double lo,
                                            double hi, uint64_t s, uint64_t o) {
  fixed_body<Rounding::kStochastic>(in, out, n, f, lo, hi, s, o);
}

// Fixed point with two's-complement wrap-around, element by element (the element i of index
// offset + i): round_k's k, then k - kmin modulo the span (2^w) plus kmin. Inf goes to the end
// of its sign (as saturation takes it), NaN passes. Below |k| = 2^52 the remainder is
// k - span * floor((k - kmin) / span), every step exact (span a power of two) and without a
// call; above, k - kmin is no longer exact in double and fmod takes it. Scalar: GCC 12 does
// not vectorise the loop (control flow in it); ~4 ns per element where most values wrap,
// against 23 with ldexp and fmod calls. The AVX-512 wrap kernel hands it its lanes past 2^52.
template <Rounding R>
TB_INLINE void fixed_wrap_body(const float* in, float* out, size_t n, int frac, int64_t kmin,
                               int64_t kmax, uint64_t seed, uint64_t offset) {
  const double lo = double(kmin), hi = double(kmax), span = hi - lo + 1.0;
  const double inv_span = 1.0 / span, up = std::ldexp(1.0, frac);
  const double down = std::ldexp(1.0, -frac);  // |frac| is small: k * down is ldexp(k, -frac)
  const SrKey key(seed);
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    uint32_t rnd = 0;
    if constexpr (R == Rounding::kStochastic) {
      const uint64_t idx = offset + i;
      rnd = key.bits(uint32_t(idx), key.hi(idx));
    }
    const double k = round_k<R>(double(x) * up, rnd);
    double w = k - span * std::floor((k - lo) * inv_span);
    if (!(std::fabs(k) < 0x1p52)) {
      w = std::fmod(k - lo, span);
      if (w < 0) w += span;
      w += lo;
    }
    // Inf to the end of its sign, as saturation takes it.
    const double kk = std::isinf(x) ? (x > 0 ? hi : lo) : w;
    const float y = float(kk * down);
    out[i] = x != x ? x : y;
  }
}

// One function per mode, as fixed_rne and its siblings, in the clones' instruction sets (floor
// is then one instruction, not a call).
#define TB_FIXED_WRAP(NAME, MODE)                                                               \
  TB_NUM_CLONES TB_NUM_NO_TRAPS void NAME(const float* in, float* out, size_t n, int frac,      \
                                          int64_t kmin, int64_t kmax, uint64_t s, uint64_t o) { \
    fixed_wrap_body<MODE>(in, out, n, frac, kmin, kmax, s, o);                                  \
  }
TB_FIXED_WRAP(fixed_wrap_rne, Rounding::kNearestEven)
TB_FIXED_WRAP(fixed_wrap_away, Rounding::kTiesAway)
TB_FIXED_WRAP(fixed_wrap_rtz, Rounding::kTowardZero)
TB_FIXED_WRAP(fixed_wrap_sr, Rounding::kStochastic)
#undef TB_FIXED_WRAP

void fixed_wrap(const float* in, float* out, size_t n, int frac, int64_t kmin, int64_t kmax,
                Rounding r, uint64_t seed, uint64_t offset) {
  const auto run = r == Rounding::kNearestEven  ? &fixed_wrap_rne
                   : r == Rounding::kTiesAway   ? &fixed_wrap_away
                   : r == Rounding::kTowardZero ? &fixed_wrap_rtz
                                                : &fixed_wrap_sr;
  run(in, out, n, frac, kmin, kmax, seed, offset);
}

[[maybe_unused]] float fixed_wrap_huge(float x, uint64_t index, int frac, int64_t kmin,
                                       int64_t kmax, Rounding r, uint64_t seed) {
  float y;
  fixed_wrap(&x, &y, 1, frac, kmin, kmax, r, seed, index);
  return y;
}

// `stream`: as run_grid's.
void fixed_loop(const float* in, float* out, size_t n, int frac, int64_t kmin, int64_t kmax,
                bool saturate, Rounding r, uint64_t seed, uint64_t offset, bool stream = false) {
  if (!saturate) {
    // Two's-complement wrap-around; every kernel is elementwise: out may be in. The AVX-512
    // wrap kernel takes every value (within the range the remainder is k itself; 0.19 ns per
    // element where most values wrap, in float32 where fixed_in_float allows, one Zen 4
    // thread, against 23 for the scalar loop with ldexp and fmod calls before it).
#if TB_AVX512_KERNELS
    if (avx512_cpu())
      return fixed_wrap512(in, out, n, frac, double(kmin), double(kmax), r, seed, offset, stream);
#endif
    return fixed_wrap(in, out, n, frac, kmin, kmax, r, seed, offset);
  }
  switch (r) {
    case Rounding::kNearestEven:
#if TB_AVX512_KERNELS
      if (avx512_cpu())
        return fixed512<Rounding::kNearestEven>(in, out, n, frac, double(kmin), double(kmax), seed,
                                                offset, stream);
#endif
      return fixed_rne(in, out, n, frac, double(kmin), double(kmax), seed, offset);
    case Rounding::kTiesAway:
#if TB_AVX512_KERNELS
      if (avx512_cpu())
        return fixed512<Rounding::kTiesAway>(in, out, n, frac, double(kmin), double(kmax), seed,
                                             offset, stream);
#endif
      return fixed_away(in, out, n, frac, double(kmin), double(kmax), seed, offset);
    case Rounding::kTowardZero:
#if TB_AVX512_KERNELS
      if (avx512_cpu())
        return fixed512<Rounding::kTowardZero>(in, out, n, frac, double(kmin), double(kmax), seed,
                                               offset, stream);
#endif
      return fixed_rtz(in, out, n, frac, double(kmin), double(kmax), seed, offset);
    case Rounding::kStochastic:
#if TB_AVX512_KERNELS
      if (avx512_cpu())
        return fixed512<Rounding::kStochastic>(in, out, n, frac, double(kmin), double(kmax), seed,
                                               offset, stream);
#endif
      return fixed_sr(in, out, n, frac, double(kmin), double(kmax), seed, offset);
  }
}

void fixed_range(const FixedFormat& f, int64_t* kmin, int64_t* kmax) {
  if (f.is_signed) {
    *kmin = -(int64_t(1) << (f.word_bits - 1));
    *kmax = (int64_t(1) << (f.word_bits - 1)) - 1;
  } else {
    *kmin = 0;
    *kmax = (int64_t(1) << f.word_bits) - 1;
  }
}

int floor_log2(float a) {  // a > 0, finite
  int e;
  std::frexp(a, &e);
  return e - 1;
}

const FloatFormat& mx_element(const std::string& name) {
  static const FloatFormat e4m3 = parse_format("e4m3").fp, e5m2 = parse_format("e5m2").fp,
                           e3m4 = parse_format("e3m4").fp, e2m3 = parse_format("e2m3").fp,
                           e3m2 = parse_format("e3m2").fp, e2m1 = parse_format("e2m1").fp;
  if (name == "e4m3") return e4m3;
  if (name == "e5m2") return e5m2;
  if (name == "e3m4") return e3m4;
  if (name == "e2m3") return e2m3;
  if (name == "e3m2") return e3m2;
  if (name == "e2m1") return e2m1;
  throw UsageError("mx element '" + name + "' is not a float element");
}

// The element format's largest exponent: the MX scale puts the block's largest value there.
int mx_emax(const BlockFormat& f) { return f.element == "int8" ? 0 : mx_element(f.element).emax(); }

Grid bfp_grid(const BlockFormat& f, int e);

// One block, the straightforward way: MX int8 elements come here.
void block_one(const BlockFormat& f, const float* in, float* out, size_t n, Rounding r,
               uint64_t seed, uint64_t offset) {
  const int e = block_exponent(f, in, n);
  if (f.kind == BlockFormat::Kind::kMx) {
    if (e == 255) {  // NaN scale: the whole block is NaN
      for (size_t i = 0; i < n; ++i) out[i] = as_float(kQuietNan);
      return;
    }
    const int scale = e - 127;
    if (f.element == "int8") {
      fixed_loop(in, out, n, 6 - scale, -128, 127, true, r, seed, offset);
    } else {
      run_grid(in, out, n, make_grid(mx_element(f.element), scale, true), r, seed, offset);
    }
    return;
  }
  run_grid(in, out, n, bfp_grid(f, e), r, seed, offset);
}

// Block formats with float-grid elements (BFP, MX with float elements): the block's grid is
// looked up in a per-exponent table, so the per-block work is the amax and two short loops.
struct BlockGrids {
  bool mx;
  int lo, hi;                                                    // shared exponent range
  int emax_elem;                                                 // MX: element emax; BFP: 0
  BlockFormat::ScaleMode mode = BlockFormat::ScaleMode::kFloor;  // MX
  int elem_mbits = 0;        // MX even: the element's mantissa bits
  float rcp_max = 0;         // MX rceil: 1 / the element's largest value, in float32
  std::vector<Grid> by_exp;  // index: shared exponent - lo
  // The same grids for the round_bits.h shortcuts, where fast_ok says they apply.
  std::vector<FastGrid> fast_by_exp;
  std::vector<char> fast_ok;
  // The run of grid indices around shared exponent 0 where fast_ok holds: a range test for 16
  // blocks at once (block_rne_avx512).
  int fast_first = 0, fast_last = -1;
};

// The MX scale's exponent (unclamped) for a block whose largest finite magnitude has the bits
// `amax` (> 0), by scale mode (format.h). `e` is floor(log2(amax)).
TB_INLINE int mx_scale_exponent(BlockFormat::ScaleMode mode, uint32_t amax, int e, int emax_elem,
                                int elem_mbits, float rcp_max) {
  switch (mode) {
    case BlockFormat::ScaleMode::kFloor:
      return e - emax_elem;
    case BlockFormat::ScaleMode::kCeil:  // up where amax is not a power of two
      return e + int((amax & 0x7FFFFFu) != 0 && (amax >> 23) != 0) - emax_elem;
    case BlockFormat::ScaleMode::kEven: {
      // amax rounded to the element's precision (half an element ulp added, mantissa dropped)
      const uint32_t r = (amax + (1u << (22 - elem_mbits))) & 0xFF800000u;
      return int(r >> 23) - 127 - emax_elem;
    }
    case BlockFormat::ScaleMode::kRceil: {
      const uint32_t d = as_bits(as_float(amax) * rcp_max);
      const uint32_t be = d >> 23, m = d & 0x7FFFFFu;
      // Normal values round up on any mantissa bit; a subnormal above 2^-127 rounds to 2^-126.
      const uint32_t up = be == 0 ? uint32_t(m > 0x400000u) : uint32_t(m != 0);
      return int(be + up) - 127;
    }
  }
  return e - emax_elem;
}

// The index of the shared exponent's grid for a block whose largest finite magnitude is `amax`.
TB_INLINE size_t block_grid(const BlockGrids& bg, uint32_t amax) {
  const int be = int(amax >> 23);
  const int e = be ? be - 127 : int(as_bits(float(int32_t(amax))) >> 23) - 127 - 149;
  int se;
  if (amax == 0)
    se = bg.lo;
  else if (bg.mx && bg.mode != BlockFormat::ScaleMode::kFloor)
    se = mx_scale_exponent(bg.mode, amax, e, bg.emax_elem, bg.elem_mbits, bg.rcp_max);
  else
    se = e - bg.emax_elem;
  return size_t(std::min(std::max(se, bg.lo), bg.hi) - bg.lo);
}

// A whole block of a compile-time size B: the loops have a constant trip count, so they compile
// to a few full vectors with no remainder loop, which matters for blocks of 16 or 32 elements
// where the loop set-up would otherwise cost as much as the work. (No private copies of the
// block: a wide load of narrower stores stalls store forwarding.)
// The largest finite magnitude's bits in a block, and whether it holds Inf or NaN. Inf and
// NaN count as 0: a max and an or reduction, which vectorise (a conditional max does not).
TB_INLINE uint32_t block_amax(const float* x, size_t n, uint32_t* special) {
  uint32_t amax = 0, sp = 0;
  // Not unrolled before vectorisation: fully unrolled bodies this long are left scalar.
#pragma GCC unroll 1
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = as_bits(x[i]) & 0x7FFFFFFFu;
    const uint32_t inf_nan = uint32_t(a >= kInfBits);
    sp |= inf_nan;
    const uint32_t finite = a & (inf_nan - 1u);
    amax = finite > amax ? finite : amax;
  }
  *special = sp;
  return amax;
}

// The elements of a whole block on its grid G.
template <Rounding R, size_t B, typename G>
TB_INLINE void round_block(const float* x, float* y, const G& grid, const SrKey& key,
                           uint64_t base) {
  const G g = grid;
  if constexpr (R == Rounding::kStochastic) {
    if (uint32_t(base) > 0xFFFFFFFFu - B) {  // the index's high word changes inside the block
      for (size_t i = 0; i < B; ++i)
        y[i] =
            as_float(round_on<R>(as_bits(x[i]), g, key.bits(uint32_t(base + i), key.hi(base + i))));
      return;
    }
    const uint32_t hi = key.hi(base), lo = uint32_t(base);
#pragma GCC unroll 1
    for (size_t i = 0; i < B; ++i)
      y[i] = as_float(round_on<R>(as_bits(x[i]), g, key.bits(lo + uint32_t(i), hi)));
  } else {
#pragma GCC unroll 1
    for (size_t i = 0; i < B; ++i) y[i] = as_float(round_on<R>(as_bits(x[i]), g, 0u));
  }
}

// Sixteen blocks' (or tiles') largest magnitudes at once. Reducing each vector on its own
// needs a horizontal reduction per block, as long as the block's rounding; reducing the 16
// together halves the lanes each holds at every level (4 levels, 15 folds of two shuffles
// and a max), and leaves v[j]'s largest lane in lane j of v[0].
typedef uint32_t U32x16 __attribute__((vector_size(64)));
// Per level, the lanes of the two vectors (0-15 the first, 16-31 the second) that each half
// of the fold takes (max_lanes_16_512 below folds in another order).
constexpr U32x16 kMaxLanesIdx[4][2] = {
    {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
     {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
    {{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27},
     {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}},
    {{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29},
     {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31}},
    {{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
     {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}}};
// Unrolled whole, as are the loops that fill v in raw_amax_16_blocks and raw_amax_16_tiles512
// (the generic raw_amax_16_tiles, for CPUs without AVX-512, is left rolled), so that v lives in
// registers: rolled, the loops kept it on the stack, a store and a load per vector per level,
// and the tree ran at ~6 cycles per vector where unrolled it takes ~1.5 (Zen 5, 16 tiles in L1).
TB_INLINE void max_lanes_16(U32x16* v) {
  // In place: no function takes or returns a vector (their ABI differs between the clones).
#pragma GCC unroll 4
  for (int level = 0; level < 4; ++level)
#pragma GCC unroll 8
    for (int t = 0; t < (8 >> level); ++t) {
      const U32x16 lo = __builtin_shuffle(v[2 * t], v[2 * t + 1], kMaxLanesIdx[level][0]);
      const U32x16 hi = __builtin_shuffle(v[2 * t], v[2 * t + 1], kMaxLanesIdx[level][1]);
      v[t] = lo > hi ? lo : hi;
    }
}

// The largest |x| bits of 16 consecutive blocks of B (16 or 32) elements, Inf and NaN as they
// are: a block whose figure is >= kInfBits holds one.
template <size_t B>
TB_INLINE void raw_amax_16_blocks(const float* x, uint32_t* out) {
  U32x16 v[16];
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) {
    std::memcpy(&v[j], x + B * j, sizeof(U32x16));
    v[j] &= 0x7FFFFFFFu;
#pragma GCC unroll 2
    for (size_t h = 16; h < B; h += 16) {
      U32x16 w;
      std::memcpy(&w, x + B * j + h, sizeof w);
      w &= 0x7FFFFFFFu;
      v[j] = v[j] > w ? v[j] : w;
    }
  }
  max_lanes_16(v);
  std::memcpy(out, &v[0], sizeof(U32x16));
}

template <Rounding R, size_t B>
TB_INLINE void whole_block(const float* x, float* y, const BlockGrids& bg, const SrKey& key,
                           uint64_t base) {
  uint32_t special = 0;
  const uint32_t amax = block_amax(x, B, &special);
  if (bg.mx && special) {  // the NaN scale: the whole block is NaN
    for (size_t i = 0; i < B; ++i) y[i] = as_float(kQuietNan);
    return;
  }
  const size_t gi = block_grid(bg, amax);
  if constexpr (R == Rounding::kNearestEven || R == Rounding::kStochastic)
    if (bg.fast_ok[gi]) return round_block<R, B>(x, y, bg.fast_by_exp[gi], key, base);
  round_block<R, B>(x, y, bg.by_exp[gi], key, base);
}

// whole_block with the block's largest |x| bits already known (raw_amax_16_blocks); a block
// holding Inf or NaN takes whole_block's own path.
template <Rounding R, size_t B>
TB_INLINE void whole_block_raw(const float* x, float* y, const BlockGrids& bg, const SrKey& key,
                               uint64_t base, uint32_t raw) {
  if (raw >= kInfBits) return whole_block<R, B>(x, y, bg, key, base);
  const size_t gi = block_grid(bg, raw);
  if constexpr (R == Rounding::kNearestEven || R == Rounding::kStochastic)
    if (bg.fast_ok[gi]) return round_block<R, B>(x, y, bg.fast_by_exp[gi], key, base);
  round_block<R, B>(x, y, bg.by_exp[gi], key, base);
}

// A block of len elements shorter than the format's the plain way: its scale from its largest
// magnitude, each element rounded on that grid; MX's NaN scale where it holds an Inf or NaN.
template <Rounding R>
TB_INLINE void short_block(const float* x, float* y, size_t len, const BlockGrids& bg,
                           const SrKey& key, uint64_t base) {
  uint32_t special = 0;
  const uint32_t amax = block_amax(x, len, &special);
  if (bg.mx && special) {  // the NaN scale: the whole block is NaN
    for (size_t i = 0; i < len; ++i) y[i] = as_float(kQuietNan);
    return;
  }
  const Grid g = bg.by_exp[block_grid(bg, amax)];
  for (size_t i = 0; i < len; ++i) {
    uint32_t rnd = 0;
    if constexpr (R == Rounding::kStochastic) {
      const uint64_t idx = base + i;
      rnd = key.bits(uint32_t(idx), key.hi(idx));
    }
    y[i] = as_float(round_bits<R>(as_bits(x[i]), g, rnd));
  }
}

#if TB_AVX512_KERNELS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12: _mm512_undefined_* in masks

// n elements of a block scaled down, rounded on the element grid `eg` and scaled back, as
// block_rne_avx512 says. NegZero: the element grid has -0 (round_nearest_even_fast512_signed).
template <bool Stream, bool NegZero = false>
TB_AVX512_INLINE void block_rne_scaled(const float* x, float* y, size_t n, __m512 down, __m512 up,
                                       const Fast512& eg) {
  for (size_t h = 0; h < n; h += 16) {
    const __mmask16 m = first_lanes(n - h);
    ahead16<Stream>(x + h);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + h), down);
    const __m512 r = round_nearest_even_fast512_for<true, NegZero>(v, eg);
    store16<Stream>(y + h, _mm512_mul_ps(r, up), m);
  }
}

// 2^-se and 2^se as float32 exponent fields (valid where fast_ok holds for se).
TB_AVX512_INLINE __m512i pow2_fields(__m512i e) {
  return _mm512_slli_epi32(_mm512_add_epi32(e, splat(127)), 23);
}

// A block of n elements whose largest |x| bits are `raw`, on the element grid `eg` as
// block_rne_avx512 says; false where the caller must round it (Inf or NaN, or no FastGrid at
// its exponent).
template <bool Stream>
TB_AVX512_INLINE bool block_rne_lean(const float* x, float* y, size_t n, uint32_t raw,
                                     const BlockGrids& bg, const Fast512& eg) {
  if (raw >= kInfBits) return false;
  const size_t gi = block_grid(bg, raw);
  if (!bg.fast_ok[gi]) return false;
  const int se = int(gi) + bg.lo;
  block_rne_scaled<Stream>(x, y, n, _mm512_castsi512_ps(splat(uint32_t(127 - se) << 23)),
                           _mm512_castsi512_ps(splat(uint32_t(127 + se) << 23)), eg);
  return true;
}

// block_grid on 16 blocks' largest finite magnitudes at once (lanes whose amax is Inf or NaN
// give garbage, which the caller does not use): each lane's shared exponent, clamped.
TB_AVX512_INLINE __m512i block_exponent512(const BlockGrids& bg, __m512i amax) {
  const __m512i zero = _mm512_setzero_si512(), m23 = splat(0x7FFFFFu), one = splat(1);
  const __m512i be = _mm512_srli_epi32(amax, 23);
  const __mmask16 sub = _mm512_cmpeq_epi32_mask(be, zero);
  // floor(log2(amax)); a subnormal amax through its exact conversion from an integer
  const __m512i e_sub = _mm512_sub_epi32(
      _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(amax)), 23), splat(127 + 149));
  const __m512i e = _mm512_mask_mov_epi32(_mm512_sub_epi32(be, splat(127)), sub, e_sub);
  const __m512i emax = splat(uint32_t(bg.emax_elem));
  __m512i se = _mm512_sub_epi32(e, emax);
  if (bg.mx && bg.mode == BlockFormat::ScaleMode::kCeil) {
    se = _mm512_mask_add_epi32(se, _mm512_test_epi32_mask(amax, m23) & ~sub, se, one);
  } else if (bg.mx && bg.mode == BlockFormat::ScaleMode::kEven) {
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(amax, splat(1u << (22 - bg.elem_mbits))),
                                       splat(0xFF800000u));
    se = _mm512_sub_epi32(_mm512_sub_epi32(_mm512_srli_epi32(r, 23), splat(127)), emax);
  } else if (bg.mx && bg.mode == BlockFormat::ScaleMode::kRceil) {
    const __m512i d =
        _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(amax), _mm512_set1_ps(bg.rcp_max)));
    const __m512i bd = _mm512_srli_epi32(d, 23), m = _mm512_and_si512(d, m23);
    const __mmask16 bd_zero = _mm512_cmpeq_epi32_mask(bd, zero);
    const __mmask16 up = (bd_zero & _mm512_cmpgt_epu32_mask(m, splat(0x400000u))) |
                         (~bd_zero & _mm512_test_epi32_mask(m, m));
    se = _mm512_sub_epi32(_mm512_mask_add_epi32(bd, up, bd, one), splat(127));
  }
  se = _mm512_mask_mov_epi32(se, _mm512_cmpeq_epi32_mask(amax, zero), splat(uint32_t(bg.lo)));
  return _mm512_min_epi32(_mm512_max_epi32(se, splat(uint32_t(bg.lo))), splat(uint32_t(bg.hi)));
}

template <size_t B, bool Stream>
TB_AVX512_INLINE void block_rne_whole(const float* x, float* y, uint32_t raw, const BlockGrids& bg,
                                      const Fast512& eg, const SrKey& key) {
  if (block_rne_lean<Stream>(x, y, B, raw, bg, eg)) return;
  if (raw >= kInfBits) return whole_block<Rounding::kNearestEven, B>(x, y, bg, key, 0);
  round_block<Rounding::kNearestEven, B>(x, y, bg.by_exp[block_grid(bg, raw)], key, 0);
}

// max_lanes_16's result (lane j of v[0] becomes v[j]'s largest) in intrinsics, v in registers
// (every loop unrolled), for the AVX-512 amax kernels: GCC kept the generic vectors on the
// stack there. Its first two levels pair lanes within each 128-bit block (vshufps: [a0 a2 b0 b2]
// and [a1 a3 b1 b3] per block), the last two whole blocks (vshufi32x4: blocks 0 2 and 1 3 of
// each), so 12 of the 15 folds shuffle in-lane; max_lanes_16's order crosses lanes in every fold
// (vpermt2d). With it in every AVX-512 amax, to nearest even and stochastically, MX e4m3 on rows
// of 768 went from 0.234 to 0.221 and 0.445 to 0.435 ns per element, bfp8 on rows of 784 from
// 0.270 to 0.252 and 0.553 to 0.538, NVFP4 from 0.232 to 0.230 and 0.397 to 0.395 (one
// thread, Zen 4; the same bits).
template <bool Blocks>
TB_AVX512_INLINE __m512i max_fold512(__m512i a, __m512i b) {
  if constexpr (Blocks)
    return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xDD));
  const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
  return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88)),
                          _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xDD)));
}
TB_AVX512_INLINE void max_lanes_16_512(__m512i* v) {
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) v[t] = max_fold512<false>(v[2 * t], v[2 * t + 1]);
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) v[t] = max_fold512<false>(v[2 * t], v[2 * t + 1]);
#pragma GCC unroll 2
  for (int t = 0; t < 2; ++t) v[t] = max_fold512<true>(v[2 * t], v[2 * t + 1]);
  v[0] = max_fold512<true>(v[0], v[1]);
}

// raw_amax_16_blocks in intrinsics, v in registers.
template <size_t B>
TB_AVX512_INLINE void raw_amax_16_blocks512(const float* x, uint32_t* out) {
  const __m512i abs_mask = splat(0x7FFFFFFFu);
  __m512i v[16];
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) {
    v[j] = _mm512_and_si512(_mm512_loadu_si512(x + B * j), abs_mask);
#pragma GCC unroll 2
    for (size_t h = 16; h < B; h += 16)
      v[j] = _mm512_max_epu32(v[j], _mm512_and_si512(_mm512_loadu_si512(x + B * j + h), abs_mask));
  }
  max_lanes_16_512(v);
  _mm512_storeu_si512(out, v[0]);
}

// raw_amax_16_blocks on the first len (< 16 * B) elements: the blocks past them have 0, the
// last one may be short. Unrolled whole, v in registers: rolled, with v on the stack and the
// generic tree, a row of 784 (16 blocks of 32, then 8 and a short one of 16) spent three times
// as long on its second group's amax as on its first's, and rounded MX e4m3 at 0.29 ns per
// element against 0.23 on rows of 768 (one thread, 2-core Zen 4).
template <size_t B>
TB_AVX512_INLINE void raw_amax_blocks512(const float* x, size_t len, uint32_t* out) {
  const __m512i abs_mask = splat(0x7FFFFFFFu);
  __m512i v[16];
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) {
    __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (size_t h = 0; h < B; h += 16) {
      const size_t at = j * B + h;
      const __mmask16 live = at < len ? first_lanes(len - at) : __mmask16(0);
      m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + at), abs_mask));
    }
    v[j] = m;
  }
  max_lanes_16_512(v);
  _mm512_storeu_si512(out, v[0]);
}

// blocks16's second half, on 16 blocks' raw figures, of which the first `live` are blocks.
TB_AVX512_INLINE uint32_t blocks16_of(const BlockGrids& bg, __m512i first, __m512i last,
                                      const uint32_t* raw, float* down, float* up, size_t live) {
  const __m512i amax = _mm512_load_si512(raw);
  const __m512i se = block_exponent512(bg, amax);
  _mm512_store_si512(down, pow2_fields(_mm512_sub_epi32(_mm512_setzero_si512(), se)));
  _mm512_store_si512(up, pow2_fields(se));
  const __m512i gi = _mm512_sub_epi32(se, splat(uint32_t(bg.lo)));
  return _mm512_cmplt_epu32_mask(amax, splat(kInfBits)) & _mm512_cmpge_epi32_mask(gi, first) &
         _mm512_cmple_epi32_mask(gi, last) & first_lanes(live);
}

// Sixteen blocks' maxima reduced together, and their shared exponents and scales computed
// together instead of block_grid's scalar branches and two broadcasts per block; a row's last
// blocks (fewer than 16, a short one among them) the same way, with masked loads. The blocks
// from x, `span` elements (<= 16 B); raw: their largest |x| bits; down, up: 2^-se and 2^se.
// Returns the lean ones as a mask: no Inf or NaN, and a grid index in [first, last] (a
// FastGrid's run): no per-block load of fast_ok behind a load of the block's grid index.
template <size_t B>
TB_AVX512_INLINE uint32_t blocks16(const float* x, size_t span, const BlockGrids& bg, __m512i first,
                                   __m512i last, uint32_t* raw, float* down, float* up) {
  if (span == 16 * B)
    raw_amax_16_blocks512<B>(x, raw);
  else
    raw_amax_blocks512<B>(x, span, raw);
  return blocks16_of(bg, first, last, raw, down, up, (span + B - 1) / B);
}

// A row's blocks of B elements rounded to nearest even, with AVX-512 intrinsics. A finite
// block whose shared exponent se has a FastGrid is rounded on the element grid (the grid at
// se = 0) as x * 2^-se, then scaled back by 2^se: the grid at se is the element grid times
// 2^se (make_grid, bfp_grid; MX and BFP saturate, so the overflow value scales too), and both
// products are exact wherever the result is not 0 (FastGrid's quanta, at every se it accepts,
// are normal and its largest values finite). One set of constants for every block and no
// Inf/NaN check (the block has none), where round_block loads a FastGrid per block. Whole
// blocks of other kinds take whole_block_raw's paths; a short last block of another kind is
// left to the caller. Returns the elements done.
template <size_t B, bool Stream, bool NegZero>
TB_AVX512 size_t block_rne_avx512(const float* x, float* y, size_t len, const BlockGrids& bg) {
  const Fast512 eg = fast512(bg.fast_by_exp[size_t(-bg.lo)]);
  const SrKey key(0);  // round_block's signature; nearest-even draws nothing
  const __m512i fast_first = splat(uint32_t(bg.fast_first));
  const __m512i fast_last = splat(uint32_t(bg.fast_last));
  const size_t blocks = (len + B - 1) / B;  // the last one may be short
  for (size_t b = 0; b < blocks; b += 16) {
    const size_t k = std::min<size_t>(16, blocks - b), span = std::min(len - b * B, 16 * B);
    alignas(64) uint32_t raw[16];
    alignas(64) float down[16], up[16];
    const uint32_t lean = blocks16<B>(x + b * B, span, bg, fast_first, fast_last, raw, down, up);
    if (lean == 0xFFFF && span == 16 * B) {
      for (size_t j = 0; j < 16; ++j)
        block_rne_scaled<Stream, NegZero>(x + (b + j) * B, y + (b + j) * B, B,
                                          _mm512_set1_ps(down[j]), _mm512_set1_ps(up[j]), eg);
      continue;
    }
    for (size_t j = 0; j < k; ++j) {
      const float* xb = x + (b + j) * B;
      float* yb = y + (b + j) * B;
      const size_t n = std::min(B, span - j * B);
      if (((lean >> j) & 1u) && n == B)  // constant masks: plain stores
        block_rne_scaled<Stream, NegZero>(xb, yb, B, _mm512_set1_ps(down[j]), _mm512_set1_ps(up[j]),
                                          eg);
      else if ((lean >> j) & 1u)
        block_rne_scaled<Stream, NegZero>(xb, yb, n, _mm512_set1_ps(down[j]), _mm512_set1_ps(up[j]),
                                          eg);
      else if (n == B)
        block_rne_whole<B, Stream>(xb, yb, raw[j], bg, eg, key);
      else
        return (b + j) * B;  // a short last block of another kind: the caller's
    }
  }
  return len;
}

template <size_t B>
size_t block_rne_row(const float* x, float* y, size_t len, const BlockGrids& bg, bool stream) {
  return with_instance(stream, bg.fast_by_exp[size_t(-bg.lo)].zero_sign, [&](auto st, auto nz) {
    return block_rne_avx512<B, st.value, nz.value>(x, y, len, bg);
  });
}

// A lean block of n elements (block_round_avx512's, below) scaled by down, rounded with R on
// the element grid and scaled back by up, masked; element i draws the word of counter ctr + i.
template <Rounding R, bool Stream, bool NegZero>
TB_AVX512_INLINE void block_round_scaled(const float* x, float* y, size_t n, __m512 down, __m512 up,
                                         __m512i ctr, __m512i hi, const Sr512& c) {
  for (size_t h = 0; h < n; h += 16) {
    const __mmask16 m = first_lanes(n - h);
    ahead16<Stream>(x + h);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + h), down);
    __m512i r = _mm512_setzero_si512();
    if constexpr (R == Rounding::kStochastic) r = hash32_512(_mm512_xor_si512(ctr, hi));
    ctr = _mm512_add_epi32(ctr, splat(16));
    store16<Stream>(y + h, _mm512_mul_ps(round16<R, NegZero>(v, r, c), up), m);
  }
}

// A row's blocks of B elements rounded stochastically, ties away or toward zero (R), as
// block_rne_avx512 rounds them to nearest even: a finite block whose shared exponent se has a
// FastGrid is rounded on the element grid as x * 2^-se, then scaled back by 2^se, 16 blocks'
// exponents at a time, where round_block's loop loads the block's grid and draws its words
// element by element. The bits below the quantum are the same in x and x * 2^-se wherever the
// product is exact, so the same random word (or the same half quantum) decides the same way.
// It is inexact only where x * 2^-se falls below float32's normal range (or x is subnormal and
// DAZ reads it as 0); such an x is below 2^(se - 126), and where the grid's smallest quantum
// at se is at least 2^-93 it is below half of it (ties away and toward zero give 0) and its
// chance of rounding up stochastically (at most 2^-33) is below the 32-bit threshold's
// resolution: 0 either way, with x's sign. Blocks below that se take round_block's path.
// Element i of the row draws SrKey's word for index base + i: the caller keeps the index's
// high word constant over the row. Returns the elements done; a short last block of another
// kind is left to the caller.
template <Rounding R, size_t B, bool Stream, bool NegZero>
TB_AVX512 size_t block_round_avx512(const float* x, float* y, size_t len, const BlockGrids& bg,
                                    const SrKey& key, uint64_t base) {
  const FastGrid& eg = bg.fast_by_exp[size_t(-bg.lo)];
  const Sr512 c = sr512(eg);
  const __m512i lean_first = splat(uint32_t(std::max(bg.fast_first, -93 - eg.below - bg.lo)));
  const __m512i fast_last = splat(uint32_t(bg.fast_last));
  const __m512i hi = splat(key.hi(base));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const uint32_t first = uint32_t(base) + key.k0;
  const size_t blocks = (len + B - 1) / B;  // the last one may be short
  for (size_t b = 0; b < blocks; b += 16) {
    const size_t k = std::min<size_t>(16, blocks - b), span = std::min(len - b * B, 16 * B);
    alignas(64) uint32_t raw[16];
    alignas(64) float down[16], up[16];
    const uint32_t lean = blocks16<B>(x + b * B, span, bg, lean_first, fast_last, raw, down, up);
    if (lean == 0xFFFF && span == 16 * B) {
      // The common case, with constant trip counts and no masks: one vector's words a step.
      __m512i ctr = _mm512_add_epi32(lane, splat(first + uint32_t(b * B)));
      for (size_t j = 0; j < 16; ++j) {
        const __m512 dv = _mm512_set1_ps(down[j]), uv = _mm512_set1_ps(up[j]);
        for (size_t h = 0; h < B; h += 16) {
          const size_t at = (b + j) * B + h;
          ahead16<Stream>(x + at);
          const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + at), dv);
          __m512i r = _mm512_setzero_si512();
          if constexpr (R == Rounding::kStochastic) r = hash32_512(_mm512_xor_si512(ctr, hi));
          ctr = _mm512_add_epi32(ctr, splat(16));
          store16<Stream>(y + at, _mm512_mul_ps(round16<R, NegZero>(v, r, c), uv), 0xFFFF);
        }
      }
      continue;
    }
    for (size_t j = 0; j < k; ++j) {
      const size_t at = (b + j) * B, n = std::min(B, span - j * B);
      if ((lean >> j) & 1u) {
        block_round_scaled<R, Stream, NegZero>(
            x + at, y + at, n, _mm512_set1_ps(down[j]), _mm512_set1_ps(up[j]),
            _mm512_add_epi32(lane, splat(first + uint32_t(at))), hi, c);
      } else if (n == B) {
        whole_block_raw<R, B>(x + at, y + at, bg, key, base + at, raw[j]);
      } else {
        return at;  // a short last block of another kind: the caller's
      }
    }
  }
  return len;
}

template <Rounding R, size_t B>
size_t block_round_row(const float* x, float* y, size_t len, const BlockGrids& bg, const SrKey& key,
                       uint64_t base, bool stream) {
  return with_instance(stream, bg.fast_by_exp[size_t(-bg.lo)].zero_sign, [&](auto st, auto nz) {
    return block_round_avx512<R, B, st.value, nz.value>(x, y, len, bg, key, base);
  });
}

// Rows shorter than a block, each row one block (a 10-class output's logits in MX's blocks of
// 32), 16 rows at a time as blocks16 takes 16 blocks: row by row, each row paid the 16 blocks'
// reduction and exponents for one block (64 x 10 logits to nearest even in 3.8 us, 0.43 us
// this way; 2-core Zen 4). The lean rows as block_rne_avx512 and block_round_avx512 round
// them, the others through short_block. Element i of x draws SrKey's word for index base + i;
// the caller keeps its high word constant.
template <Rounding R, size_t B, bool Stream, bool NegZero>
TB_AVX512 void short_rows_avx512(const float* x, float* y, size_t rows, size_t row,
                                 const BlockGrids& bg, const SrKey& key, uint64_t base) {
  const FastGrid& fg = bg.fast_by_exp[size_t(-bg.lo)];
  const Fast512 eg = fast512(fg);
  const Sr512 c = sr512(fg);
  const __m512i first_lean = splat(uint32_t(R == Rounding::kNearestEven
                                                ? bg.fast_first
                                                : std::max(bg.fast_first, -93 - fg.below - bg.lo)));
  const __m512i fast_last = splat(uint32_t(bg.fast_last));
  const __m512i hi = splat(key.hi(base));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const uint32_t first = uint32_t(base) + key.k0;
  for (size_t r0 = 0; r0 < rows; r0 += 16) {
    const size_t k = std::min<size_t>(16, rows - r0);
    __m512i v[16];
    for (size_t j = 0; j < 16; ++j) {
      __m512i m = _mm512_setzero_si512();
      for (size_t h = 0; j < k && h < row; h += 16)
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(first_lanes(row - h),
                                                                          x + (r0 + j) * row + h),
                                                 splat(0x7FFFFFFFu)));
      v[j] = m;
    }
    max_lanes_16_512(v);
    alignas(64) uint32_t raw[16];
    alignas(64) float down[16], up[16];
    _mm512_store_si512(raw, v[0]);
    const uint32_t lean = blocks16_of(bg, first_lean, fast_last, raw, down, up, k);
    for (size_t j = 0; j < k; ++j) {
      const size_t at = (r0 + j) * row;
      if (!((lean >> j) & 1u)) {
        short_block<R>(x + at, y + at, row, bg, key, base + at);
        continue;
      }
      const __m512 dv = _mm512_set1_ps(down[j]), uv = _mm512_set1_ps(up[j]);
      if constexpr (R == Rounding::kNearestEven)
        block_rne_scaled<Stream, NegZero>(x + at, y + at, row, dv, uv, eg);
      else
        block_round_scaled<R, Stream, NegZero>(x + at, y + at, row, dv, uv,
                                               _mm512_add_epi32(lane, splat(first + uint32_t(at))),
                                               hi, c);
    }
  }
}

template <Rounding R, size_t B>
void short_rows(const float* x, float* y, size_t rows, size_t row, const BlockGrids& bg,
                const SrKey& key, uint64_t base, bool stream) {
  with_instance(stream, bg.fast_by_exp[size_t(-bg.lo)].zero_sign, [&](auto st, auto nz) {
    short_rows_avx512<R, B, st.value, nz.value>(x, y, rows, row, bg, key, base);
  });
}

// MX with int8 elements (k * 2^(se - 6), k in [-128, 127], saturating: block_one's fixed_loop
// with frac = 6 - se), in any rounding mode (stochastically with SrKey's word for index
// base + i; the caller keeps its high word constant), 16 blocks of B (16 or 32) at a time:
// their exponents together (block_exponent512 with an int8 element's emax of 0 and the floor
// scale, which int8 blocks take whatever the mode), then each block through fixed16, where
// block_one's calls cost more than its elements (4-5 ns per element). A block holding Inf or
// NaN has the NaN scale. Whole groups only: returns the elements done, a multiple of 16 B.
template <Rounding R, size_t B, bool Stream>
TB_AVX512 size_t mx_int8_avx512(const float* x, float* y, size_t len, const SrKey& key,
                                uint64_t base) {
  static_assert(B == 16 || B == 32, "the kernel's blocks are one or two vectors");
  static const BlockGrids bg = [] {
    BlockGrids g;
    g.mx = true;
    g.lo = -127;
    g.hi = 127;
    g.emax_elem = 0;
    return g;
  }();
  const __m512d lo = _mm512_set1_pd(-128), hi = _mm512_set1_pd(127);
  const __m512 lof = _mm512_set1_ps(-128), hif = _mm512_set1_ps(127);
  const __m512i hk = splat(key.hi(base));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const uint32_t first = uint32_t(base) + key.k0;
  const __m512 nan = _mm512_castsi512_ps(splat(kQuietNan));
  size_t g0 = 0;
  for (; g0 + 16 * B <= len; g0 += 16 * B) {
    alignas(64) uint32_t raw[16];
    alignas(64) int32_t se[16];
    raw_amax_16_blocks<B>(x + g0, raw);
    const __m512i amax = _mm512_load_si512(raw);
    _mm512_store_si512(se, block_exponent512(bg, amax));
    const uint32_t special = _mm512_cmpge_epu32_mask(amax, splat(kInfBits));
    for (size_t j = 0; j < 16; ++j) {
      const size_t at = g0 + B * j;
      if ((special >> j) & 1u) {
        for (size_t h = 0; h < B; h += 16) store16<Stream>(y + at + h, nan, 0xFFFF);
        continue;
      }
      // frac = 6 - se in [0, 126] (se in [-120, 6]: blocks of magnitude below 128) in float32
      // (fixed_in_float), else in double: 2^frac and 2^-frac built from their fields.
      const int frac = 6 - se[j];
      const bool in_float = frac >= 0 && frac <= 126;
      const __m512 upf = _mm512_castsi512_ps(splat(uint32_t(127 + (in_float ? frac : 0)) << 23));
      const __m512 downf = _mm512_castsi512_ps(splat(uint32_t(127 - (in_float ? frac : 0)) << 23));
      const __m512d up = _mm512_castsi512_pd(_mm512_set1_epi64(int64_t(1023 + frac) << 52));
      const __m512d down = _mm512_castsi512_pd(_mm512_set1_epi64(int64_t(1023 - frac) << 52));
      for (size_t h = 0; h < B; h += 16) {
        __m512i r = _mm512_setzero_si512();
        if constexpr (R == Rounding::kStochastic)
          r = hash32_512(
              _mm512_xor_si512(_mm512_add_epi32(lane, splat(first + uint32_t(at + h))), hk));
        ahead16<Stream>(x + at + h);
        const __m512 v = _mm512_loadu_ps(x + at + h);
        store16<Stream>(
            y + at + h,
            in_float ? fixed16f<R>(v, r, upf, downf, lof, hif) : fixed16<R>(v, r, up, down, lo, hi),
            0xFFFF);
      }
    }
  }
  return g0;
}
#pragma GCC diagnostic pop
#endif

template <Rounding R, size_t B>
TB_INLINE void block_rows(const float* in, float* out, size_t n, size_t row, size_t block,
                          const BlockGrids& bg, uint64_t seed, uint64_t offset, bool stream) {
  const SrKey key(seed);
  // Rows of whole blocks are blocks end to end, as one row: the loops that take 16 blocks at
  // once then run on a tensor of short rows too (a row of 256 holds only 8 blocks of 32).
  if (row % block == 0) row = n;
  // Rows shorter than a block, 16 at a time (short_rows); a short last row below.
  size_t r_first = 0;
#if TB_AVX512_KERNELS
  if constexpr (B == 16 || B == 32)
    if (row < B && row < n && avx512_cpu() && bg.lo <= 0 && bg.hi >= 0 &&
        bg.fast_ok[size_t(-bg.lo)] &&
        (R == Rounding::kNearestEven || same_high_word(offset, 0, n) == n)) {
      short_rows<R, B>(in, out, n / row, row, bg, key, offset, stream);
      r_first = n / row * row;
    }
#endif
  for (size_t r0 = r_first; r0 < n; r0 += row) {
    const size_t rn = std::min(row, n - r0);
    size_t b0 = 0;
#if TB_AVX512_KERNELS
    if constexpr (R == Rounding::kNearestEven && (B == 16 || B == 32))
      if (avx512_cpu() && bg.lo <= 0 && bg.hi >= 0 && bg.fast_ok[size_t(-bg.lo)])
        b0 = block_rne_row<B>(in + r0, out + r0, rn, bg, stream);
    if constexpr (R != Rounding::kNearestEven && (B == 16 || B == 32))
      if (avx512_cpu() && bg.lo <= 0 && bg.hi >= 0 && bg.fast_ok[size_t(-bg.lo)] &&
          same_high_word(offset + r0, 0, rn) == rn)
        b0 = block_round_row<R, B>(in + r0, out + r0, rn, bg, key, offset + r0, stream);
#endif
    if constexpr (B == 16 || B == 32)
      for (; b0 + 16 * B <= rn; b0 += 16 * B) {
        uint32_t raw[16];
        raw_amax_16_blocks<B>(in + r0 + b0, raw);
        for (size_t j = 0; j < 16; ++j)
          whole_block_raw<R, B>(in + r0 + b0 + j * B, out + r0 + b0 + j * B, bg, key,
                                offset + r0 + b0 + j * B, raw[j]);
      }
    for (; b0 < rn; b0 += block) {
      const size_t len = std::min(block, rn - b0);
      const float* x = in + r0 + b0;
      float* y = out + r0 + b0;
      const uint64_t base = offset + r0 + b0;
      if (B != 0 && len == B)
        whole_block<R, B>(x, y, bg, key, base);
      else
        short_block<R>(x, y, len, bg, key, base);
    }
  }
}

// Blocks of 16 (bfp8) and 32 (MX) elements get their own instances; other sizes the loop.
template <Rounding R>
TB_INLINE void block_any(const float* in, float* out, size_t n, size_t row, size_t block,
                         const BlockGrids& bg, uint64_t seed, uint64_t offset, bool stream) {
  if (block == 32) return block_rows<R, 32>(in, out, n, row, block, bg, seed, offset, stream);
  if (block == 16) return block_rows<R, 16>(in, out, n, row, block, bg, seed, offset, stream);
  block_rows<R, 0>(in, out, n, row, block, bg, seed, offset, stream);
}

// `stream`: run_grid's; only the AVX-512 rows use it.
TB_NUM_CLONES void block_rne(const float* in, float* out, size_t n, size_t row, size_t block,
                             const BlockGrids& bg, uint64_t s, uint64_t o, bool stream) {
  block_any<Rounding::kNearestEven>(in, out, n, row, block, bg, s, o, stream);
}
TB_NUM_CLONES void block_away(const float* in, float* out, size_t n, size_t row, size_t block,
                              const BlockGrids& bg, uint64_t s, uint64_t o, bool stream) {
  block_any<Rounding::kTiesAway>(in, out, n, row, block, bg, s, o, stream);
}
TB_NUM_CLONES void block_rtz(const float* in, float* out, size_t n, size_t row, size_t block,
                             const BlockGrids& bg, uint64_t s, uint64_t o, bool stream) {
  block_any<Rounding::kTowardZero>(in, out, n, row, block, bg, s, o, stream);
}
TB_NUM_CLONES void block_sr(const float* in, float* out, size_t n, size_t row, size_t block,
                            const BlockGrids& bg, uint64_t s, uint64_t o, bool stream) {
  block_any<Rounding::kStochastic>(in, out, n, row, block, bg, s, o, stream);
}

Grid bfp_grid(const BlockFormat& f, int e) {
  // Every element is k * 2^(e - man_bits + 1), |k| < 2^man_bits. As a float grid that is
  // all-subnormal: emin = e + 1 with man_bits mantissa bits.
  Grid g;
  g.emin = e + 1;
  g.man_bits = f.man_bits;
  g.sub = 1;
  g.max_bits = float_bits_of(std::ldexp(std::ldexp(1.0, f.man_bits) - 1.0, e - f.man_bits + 1));
  g.ovf_bits = g.max_bits;
  g.zero_sign = 0x80000000u;
  return g;
}

const BlockGrids& block_grids(const BlockFormat& f) {
  // One table per distinct format, built once; formats are few.
  static std::mutex mu;
  static std::vector<std::pair<BlockFormat, std::unique_ptr<BlockGrids>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, v] : cache)
    if (k == f) return *v;
  auto bg = std::make_unique<BlockGrids>();
  bg->mx = f.kind == BlockFormat::Kind::kMx;
  if (bg->mx) {
    bg->lo = -127;
    bg->hi = 127;
    bg->emax_elem = mx_emax(f);
    bg->mode = f.scale_mode;
    bg->elem_mbits = mx_element(f.element).man_bits;
    bg->rcp_max = float(1.0 / mx_element(f.element).max_finite());
    for (int e = bg->lo; e <= bg->hi; ++e)
      bg->by_exp.push_back(make_grid(mx_element(f.element), e, true));
  } else {
    const int bias = (1 << (f.scale_bits - 1)) - 1;
    bg->lo = std::max(1 - bias, -149 + f.man_bits - 1);
    bg->hi = bias;
    bg->emax_elem = 0;
    for (int e = bg->lo; e <= bg->hi; ++e) bg->by_exp.push_back(bfp_grid(f, e));
  }
  for (const Grid& g : bg->by_exp) {
    FastGrid fg{};
    bg->fast_ok.push_back(fast_grid(g, &fg));
    bg->fast_by_exp.push_back(fg);
  }
  if (bg->lo <= 0 && bg->hi >= 0 && bg->fast_ok[size_t(-bg->lo)]) {
    bg->fast_first = bg->fast_last = -bg->lo;
    while (bg->fast_first > 0 && bg->fast_ok[size_t(bg->fast_first - 1)]) --bg->fast_first;
    while (size_t(bg->fast_last + 1) < bg->fast_ok.size() && bg->fast_ok[size_t(bg->fast_last + 1)])
      ++bg->fast_last;
  }
  cache.emplace_back(f, std::move(bg));
  return *cache.back().second;
}

// The largest |x| bits of 16 consecutive 16-element tiles, each spanning `rows` rows `stride`
// elements apart (NVFP4's 16x16 weight tiles span 16), NaN as its bits (above Inf's), folded
// into acc[0..16). The rows are folded element-wise first, so one 16-lane reduction serves a
// whole 2-D tile; the caller takes a NaN out afterwards (a tile whose figure is above Inf's),
// where checking every 16 tiles for one cost as much as their reduction.
TB_INLINE void raw_amax_16_tiles(const float* x, size_t rows, size_t stride, uint32_t* acc) {
  U32x16 v[16];
  for (int t = 0; t < 16; ++t) {
    std::memcpy(&v[t], x + 16 * t, sizeof(U32x16));
    v[t] &= 0x7FFFFFFFu;
  }
  for (size_t i = 1; i < rows; ++i)
    for (int t = 0; t < 16; ++t) {
      U32x16 w;
      std::memcpy(&w, x + i * stride + 16 * t, sizeof w);
      w &= 0x7FFFFFFFu;
      v[t] = v[t] > w ? v[t] : w;
    }
  max_lanes_16(v);
  U32x16 a;
  std::memcpy(&a, acc, sizeof a);
  a = a > v[0] ? a : v[0];
  std::memcpy(acc, &a, sizeof a);
}

#if TB_AVX512_KERNELS
// raw_amax_16_tiles in intrinsics, its 16 accumulators in registers: GCC kept the generic
// vectors' array on the stack inside nvfp4_serial (a store and a load per vector per fold).
// In an NVFP4 training step the pass is still mostly waiting for its lines (the first touch
// of each tensor): ~14% fewer samples than the generic form, next to the rounding's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12: _mm512_undefined_* in masks
#pragma GCC diagnostic ignored "-Wuninitialized"
TB_AVX512 void raw_amax_16_tiles512(const float* x, size_t rows, size_t stride, uint32_t* acc) {
  const __m512i abs_mask = splat(0x7FFFFFFFu);
  __m512i v[16];
  // Every loop over v unrolled, as in max_lanes_16, so that v stays in registers.
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) v[t] = _mm512_and_si512(_mm512_loadu_si512(x + 16 * t), abs_mask);
  for (size_t i = 1; i < rows; ++i) {
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t)
      v[t] = _mm512_max_epu32(
          v[t], _mm512_and_si512(_mm512_loadu_si512(x + i * stride + 16 * t), abs_mask));
  }
  max_lanes_16_512(v);  // lane j of v[0]: v[j]'s largest
  _mm512_storeu_si512(acc, _mm512_max_epu32(_mm512_loadu_si512(acc), v[0]));
}
#pragma GCC diagnostic pop
#endif

// The largest |x| bits (NaN ignored, as fmaxf does) of each of the `tiles` tiles of a band of
// `len` elements, rows of `row`: whole rows (all but a call's last may be short) 16 tiles at a
// time over all of them, raw; then a short last row's own groups of 16; the tiles left one row
// at a time, NaN ignored. Returns whether the band holds a NaN. A free function, not
// nvfp4_serial's lambda: a lambda is compiled once outside the target clones, and this one, not
// inlined, ran its vectors on SSE2.
TB_INLINE bool nvfp4_band_amax(const float* x0, size_t len, size_t row, size_t block, size_t tiles,
                               uint32_t* amax) {
  constexpr size_t kTile = 16;
  std::fill(amax, amax + tiles, 0u);
  const size_t rows = (len + row - 1) / row;
  const auto row_len = [&](size_t i) { return std::min(row, len - i * row); };
  const size_t full = row_len(rows - 1) == row ? rows : rows - 1;
  const size_t short_len = full < rows ? row_len(full) : 0;
  size_t t = 0, ts = 0;
#if TB_AVX512_KERNELS
  if (block == kTile && avx512_cpu()) {
    if (full > 0)
      for (; (t + 16) * kTile <= row; t += 16)
        raw_amax_16_tiles512(x0 + t * kTile, full, row, &amax[t]);
    for (; (ts + 16) * kTile <= short_len; ts += 16)
      raw_amax_16_tiles512(x0 + full * row + ts * kTile, 1, row, &amax[ts]);
  }
#endif
  if (block == kTile) {
    if (full > 0)
      for (; (t + 16) * kTile <= row; t += 16)
        raw_amax_16_tiles(x0 + t * kTile, full, row, &amax[t]);
    for (; (ts + 16) * kTile <= short_len; ts += 16)
      raw_amax_16_tiles(x0 + full * row + ts * kTile, 1, row, &amax[ts]);
  }
  bool nan = false;
  for (size_t i = 0; i < rows; ++i) {
    const float* x = x0 + i * row;
    const size_t rl = row_len(i);
    for (size_t u = i < full ? t : ts; u * block < rl; ++u)
      amax[u] =
          std::max(amax[u], amax_bits_nan(x + u * block, std::min(block, rl - u * block), &nan));
  }
  // A NaN's bits (above Inf's) in a raw figure: that tile again, NaN ignored.
  const size_t raw = std::max(t, ts);
  uint32_t raw_nan = 0;
  for (size_t u = 0; u < raw; ++u) raw_nan |= uint32_t(amax[u] > kInfBits);
  if (!raw_nan) return nan;
  for (size_t u = 0; u < raw; ++u)
    if (amax[u] > kInfBits) {
      amax[u] = 0;
      for (size_t i = 0; i < rows; ++i)
        if (u * block < row_len(i))
          amax[u] = std::max(amax[u], amax_bits_inline(x0 + i * row + u * block,
                                                       std::min(block, row_len(i) - u * block)));
    }
  return true;
}

// NVFP4's element grid (E2M1) and the FastGrids of it and of its E4M3 scales. Not statics of
// nvfp4_serial: GCC gives each target_clones clone its own copy of a function's statics, and a
// lambda initialising one is compiled once, outside the clones, so unless it is inlined (-O3
// inlines it, -O2 does not) it fills one clone's copy while the running clone reads its own,
// still zero: every NVFP4 call threw "does not match" in an -O2 build.
struct Nvfp4Grids {
  Grid elem;
  FastGrid elem_fast, scale_fast;
};

const Nvfp4Grids& nvfp4_grids() {
  static const Nvfp4Grids grids = [] {
    Nvfp4Grids n{};
    n.elem = make_grid(mx_element("e2m1"), 0, true);
    if (!fast_grid(n.elem, &n.elem_fast)) throw std::logic_error("e2m1 is not a fast grid");
    const FastGrid& g = n.elem_fast;
    if (g.emin != 0 || g.man_bits != 1 || g.below != -1 || g.max_bits != as_bits(6.0f) ||
        g.ovf_bits != g.max_bits || g.zero_sign != 0x80000000u)
      throw std::logic_error("round_stochastic_e2m1 and e2m1_rne16 do not match e2m1's grid");
    FloatFormat e4m3 = mx_element("e4m3");
    e4m3.overflow = Overflow::kSaturate;  // Transformer Engine casts scales with satfinite
    if (!fast_grid(make_grid(e4m3, 0, true), &n.scale_fast))
      throw std::logic_error("e4m3 is not a fast grid");
    return n;
  }();
  return grids;
}

// NVFP4 (format.h) over rows of `row` elements; `in` starts on a tile's first row. A band of
// `rows` rows at a time: the tiles' amax and scales first (an integer max over 16 lanes, the
// E4M3 scale by the FPU's rounding), then every row scaled, rounded and scaled back; in one
// pass per row of whole tiles for every mode (AVX-512), through run_grid otherwise. The
// arithmetic and its order are Transformer Engine's (core_nvfp4.cuh); round_nearest_even_fast
// is bit-identical to round_bits on these grids (fast_grid()). `stream`: the output is past the
// caches (quantize_streaming); `readable`: the elements from `in` that exist, at least n, of
// which the next band's are requested while this one is rounded.
// The tiles' E4M3 decode scales (their amax times k, rounded to nearest even, saturating) and
// encode scales 1 / (decode * s_dec), at most FLT_MAX: 16 tiles at a time where the CPU has
// AVX-512 (nvfp4_scales512), the same float32 operations otherwise.
TB_INLINE void nvfp4_tile_scales(const uint32_t* amax, float* enc, float* dec, size_t tiles,
                                 float k, float s_dec, const FastGrid& scale_fast) {
  constexpr float kFltMax = std::numeric_limits<float>::max();
  size_t t0 = 0;
#if TB_AVX512_KERNELS
  if (avx512_cpu()) {
    nvfp4_scales512(amax, enc, dec, tiles, k, s_dec, scale_fast);
    t0 = tiles;
  }
#endif
  for (size_t t = t0; t < tiles; ++t) {
    const float sb = as_float(round_nearest_even_fast(as_bits(as_float(amax[t]) * k), scale_fast));
    const float e0 = 1.0f / (sb * s_dec);
    enc[t] = !(e0 <= kFltMax) ? kFltMax : e0;  // fminf's result, without its call
    dec[t] = sb;
  }
}

constexpr size_t kNvfp4Row = 4096;

TB_NUM_CLONES void nvfp4_serial(const BlockFormat& f, const float* in, float* out, size_t n,
                                size_t row, float tensor_amax, Rounding r, uint64_t seed,
                                uint64_t offset, bool stream, size_t readable) {
  const Nvfp4Grids& grids = nvfp4_grids();
  const Grid& elem = grids.elem;
  const FastGrid elem_fast = grids.elem_fast, scale_fast = grids.scale_fast;
  constexpr float kFltMax = std::numeric_limits<float>::max();
  constexpr size_t kTile = 16;
  if (n == 0) return;
  const size_t block = size_t(f.block);
  // One-row tiles on rows of whole tiles are tiles end to end: rows of 4096 elements then (16
  // KiB, in L1 between the amax and the rounding), one call of each kernel for them rather than
  // three per row of the tensor (a row of 256 is 16 tiles).
  if (f.rows == 1 && row % block == 0) row = std::min(n, std::max(row, kNvfp4Row));
  const size_t band = size_t(f.rows) * row, tiles = (row + block - 1) / block;
  // Per thread, reused: a call may be one 4096-element tile of a streamed array.
  thread_local std::vector<float> enc, dec, buf, tile_enc, tile_dec;
  thread_local std::vector<uint32_t> tile_amax;
  const size_t bands = (n + band - 1) / band;
  // No tensor amax given (a call that is the whole tensor): every tile's amax first, and the
  // tensor's is their largest, instead of a pass of its own over the input.
  const bool fused = tensor_amax < 0;
  const size_t kept = fused ? bands * tiles : tiles;
  if (tile_enc.size() < tiles) tile_enc.resize(tiles), tile_dec.resize(tiles);
  if (tile_amax.size() < kept) tile_amax.resize(kept);
  // Rows shorter than a tile, one tile each (a 10-class output's logits), all at once to nearest
  // even or stochastically: band by band, each row paid a call of every kernel for one tile
  // (64 x 10 logits in 3.3 us to nearest even, 1.2 us this way; stochastic 3.5 and 1.7 us;
  // 2-core Zen 4). The same arithmetic as the loops below (the scales 16 tiles at a time as
  // there; stochastic rounding draws the word of each element's 64-bit index, as run_grid does
  // where a row crosses a 2^32 boundary).
  if (f.rows == 1 && row < block && (r == Rounding::kNearestEven || r == Rounding::kStochastic)) {
    const size_t short_tiles = (n + row - 1) / row;
    if (tile_amax.size() < short_tiles) tile_amax.resize(short_tiles);
    if (tile_enc.size() < short_tiles) tile_enc.resize(short_tiles), tile_dec.resize(short_tiles);
    bool ignored = false;  // the element loops below take NaN as it comes
    uint32_t largest = 0;
    for (size_t t = 0; t < short_tiles; ++t) {
      tile_amax[t] = amax_bits_nan(in + t * row, std::min(row, n - t * row), &ignored);
      largest = std::max(largest, tile_amax[t]);
    }
    if (tensor_amax < 0) tensor_amax = as_float(largest);
    float s_enc = std::fmin(448.0f * 6.0f / tensor_amax, kFltMax);
    if (tensor_amax == 0 || s_enc == 0) s_enc = 1;
    const float s_dec = 1.0f / s_enc, k = s_enc * (1.0f / 6.0f);
    nvfp4_tile_scales(tile_amax.data(), tile_enc.data(), tile_dec.data(), short_tiles, k, s_dec,
                      scale_fast);
    const SrKey key(seed);
    for (size_t t = 0; t < short_tiles; ++t) {
      const float e = tile_enc[t], d = tile_dec[t];
      const size_t j0 = t * row, j1 = std::min(n, j0 + row);
      if (r == Rounding::kNearestEven)
        for (size_t j = j0; j < j1; ++j)
          out[j] = as_float(round_nearest_even_fast(as_bits(in[j] * e), elem_fast)) * d * s_dec;
      else
        for (size_t j = j0; j < j1; ++j) {
          const uint64_t idx = offset + j;
          out[j] = as_float(round_stochastic_e2m1(as_bits(in[j] * e), elem_fast,
                                                  key.bits(uint32_t(idx), key.hi(idx)))) *
                   d * s_dec;
        }
    }
    return;
  }
  // Whether the tiles rounded next may hold a NaN (the rounding's shorter form assumes none):
  // the whole call's in the fused form, else each band's.
  bool nan = false;
  if (fused) {
    for (size_t bi = 0; bi < bands; ++bi)
      nan = nvfp4_band_amax(in + bi * band, std::min(band, n - bi * band), row, block, tiles,
                            tile_amax.data() + bi * tiles) ||
            nan;
    tensor_amax =
        as_float(kept ? *std::max_element(tile_amax.begin(), tile_amax.begin() + long(kept)) : 0u);
  }
  float s_enc = std::fmin(448.0f * 6.0f / tensor_amax, kFltMax);
  if (tensor_amax == 0 || s_enc == 0) s_enc = 1;
  const float s_dec = 1.0f / s_enc;
  const float k = s_enc * (1.0f / 6.0f);
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += band, ++bi) {
    const size_t rows = (std::min(band, n - b0) + row - 1) / row;
    // A call's last row may be short (n not a multiple of row): its tiles end with it.
    auto row_len = [&](size_t i) { return std::min(row, n - (b0 + i * row)); };
    const uint32_t* amax = tile_amax.data() + (fused ? bi * tiles : 0);
    if (!fused)
      nan = nvfp4_band_amax(in + b0, std::min(band, n - b0), row, block, tiles, tile_amax.data());
    nvfp4_tile_scales(amax, tile_enc.data(), tile_dec.data(), tiles, k, s_dec, scale_fast);
#if TB_AVX512_KERNELS
    // The same row of the next band, requested a line per tile while this one is rounded, so
    // that the next band's amax finds it in the caches: `readable` elements from `in` exist.
    const auto next_band = [&](size_t at, size_t rl) {
      const size_t from = std::min(at + band, readable);
      return Ahead{in + from, (std::min(from + rl, readable) - from) / kTile};
    };
#endif
    for (size_t i = 0; i < rows; ++i) {
      const size_t at = b0 + i * row, rl = row_len(i);
      const float* x = in + at;
      float* y = out + at;
      if (r == Rounding::kNearestEven && block == kTile) {
        // Whole tiles as one vector each, as the stochastic loop below; then a short last tile.
        const auto rne = [&](float v, float e, float d) {
          return as_float(round_nearest_even_fast(as_bits(v * e), elem_fast)) * d * s_dec;
        };
        size_t t = 0;
#if TB_AVX512_KERNELS
        if (avx512_cpu())
          t = nvfp4_rne_tiles512(x, y, rl / kTile, tile_enc.data(), tile_dec.data(), s_dec,
                                 elem_fast, stream, !nan, next_band(at, rl));
#endif
        for (; (t + 1) * kTile <= rl; ++t) {
          const float e = tile_enc[t], d = tile_dec[t];
          const float* xt = x + t * kTile;
          float* yt = y + t * kTile;
#pragma GCC ivdep
          for (uint32_t k = 0; k < kTile; ++k) yt[k] = rne(xt[k], e, d);
        }
        for (size_t j = t * kTile; j < rl; ++j) y[j] = rne(x[j], tile_enc[t], tile_dec[t]);
        continue;
      }
      // Stochastic rounding in one pass too, with run_grid's bits: element j draws from index
      // offset + at + j, whose high word is constant unless the row crosses a 2^32 boundary.
      if (r == Rounding::kStochastic && block == kTile &&
          same_high_word(offset, at, at + rl) == rl) {
        const SrKey key(seed);
        const uint32_t hi = key.hi(offset + at), lo = uint32_t(offset + at);
        // Whole tiles as one vector each (no aliasing check: element j reads x[j] only), the
        // counter in 32-bit lanes; then a short last tile.
        const auto sr = [&](float v, float e, float d, uint32_t index) {
          return as_float(round_stochastic_e2m1(as_bits(v * e), elem_fast, key.bits(index, hi))) *
                 d * s_dec;
        };
        size_t t = 0;
#if TB_AVX512_KERNELS
        if (avx512_cpu())
          t = nvfp4_sr_tiles512(x, y, rl / kTile, tile_enc.data(), tile_dec.data(), s_dec,
                                lo + key.k0, hi, elem_fast, stream, !nan, next_band(at, rl));
#endif
        for (; (t + 1) * kTile <= rl; ++t) {
          const float e = tile_enc[t], d = tile_dec[t];
          const float* xt = x + t * kTile;
          float* yt = y + t * kTile;
          const uint32_t at_t = lo + uint32_t(t * kTile);
#pragma GCC ivdep
          for (uint32_t k = 0; k < kTile; ++k) yt[k] = sr(xt[k], e, d, at_t + k);
        }
        for (size_t j = t * kTile; j < rl; ++j)
          y[j] = sr(x[j], tile_enc[t], tile_dec[t], lo + uint32_t(j));
        continue;
      }
#if TB_AVX512_KERNELS
      if ((r == Rounding::kTiesAway || r == Rounding::kTowardZero) && block == kTile &&
          rl % kTile == 0 && avx512_cpu()) {
        nvfp4_directed_tiles512(x, y, rl / kTile, tile_enc.data(), tile_dec.data(), s_dec,
                                elem_fast, r, stream, next_band(at, rl));
        continue;
      }
#endif
      if (enc.size() < rl) enc.resize(rl), dec.resize(rl), buf.resize(rl);
      for (size_t t = 0; t * block < rl; ++t)
        for (size_t j = t * block; j < std::min(rl, (t + 1) * block); ++j) {
          enc[j] = tile_enc[t];
          dec[j] = tile_dec[t];
        }
      for (size_t j = 0; j < rl; ++j) buf[j] = x[j] * enc[j];
      run_grid(buf.data(), buf.data(), rl, elem, r, seed, offset + at);
      for (size_t j = 0; j < rl; ++j) y[j] = buf[j] * dec[j] * s_dec;
    }
  }
}

// MX rceil's scale comes from amax / the element's largest value, a float32 product that is
// subnormal for blocks whose amax is below about 2^-117: under FTZ/DAZ (as trainbench runs) it
// flushes to 0 and the shared exponent came out one lower than the definition's. For an rceil
// format, subnormals are kept for the object's lifetime (this thread's MXCSR); every other step
// of the block paths gives the same bits with or without them.
class RceilSubnormals {
 public:
  explicit RceilSubnormals(const BlockFormat& f) {
#if defined(__SSE2__)
    if (f.kind == BlockFormat::Kind::kMx && f.scale_mode == BlockFormat::ScaleMode::kRceil &&
        (saved_ & 0x8040u)) {
      _mm_setcsr(saved_ & ~0x8040u);
      changed_ = true;
    }
#else
    (void)f;
#endif
  }
  ~RceilSubnormals() {
#if defined(__SSE2__)
    if (changed_) _mm_setcsr(saved_);
#endif
  }
  RceilSubnormals(const RceilSubnormals&) = delete;
  RceilSubnormals& operator=(const RceilSubnormals&) = delete;

 private:
#if defined(__SSE2__)
  unsigned saved_ = _mm_getcsr();
#else
  unsigned saved_ = 0;
#endif
  bool changed_ = false;
};

// QuantOptions::input_amax's tiles: 16 KiB, well inside any L1 data cache.
constexpr size_t kAmaxTile = 4096;

// binary32 itself (the `fp32` preset, format.cc's identity): every float is on its grid in
// every rounding mode, so run_grid's walk of the grid only made a NaN the quiet NaN of its
// sign. The same bits in one pass: the walk took ~0.6 ns per element (165 us for the fc
// config's 268,800 weights, 23.5 us this way; 2-core Zen 5), so a point written as fp32
// (`m:fp32`) made that config's step 868 us against fp32's 700.
TB_NUM_CLONES void binary32_identity(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = as_bits(in[i]);
    out[i] = as_float((b & 0x7FFFFFFFu) > kInfBits ? (b & 0x80000000u) | kQuietNan : b);
  }
}

// `stream`: the output is past the caches (quantize_streaming); the AVX-512 kernels write it
// with non-temporal stores themselves (streams_directly). `ahead`: elements after `in + n`
// that exist (the next tile), which NVFP4 requests while it rounds these.
void quantize_serial(const Format& f, const float* in, float* out, size_t n, const QuantOptions& o,
                     uint64_t offset, bool stream = false, size_t ahead = 0) {
  switch (f.kind) {
    case Format::Kind::kFloat: {
      if (o.input_amax) {
        // Each tile's amax, then its rounding while the tile is still in L1.
        QuantOptions t = o;
        t.input_amax = nullptr;
        uint32_t m = 0;
        for (size_t i = 0; i < n; i += kAmaxTile) {
          const size_t len = std::min(kAmaxTile, n - i);
          m = std::max(m, amax_bits(in + i, len));
          quantize_serial(f, in + i, out + i, len, t, offset + i, stream);
        }
        *o.input_amax = std::fmax(*o.input_amax, as_float(m));
        return;
      }
      if (f.fp == FloatFormat{} && o.scale == 1.0f) return binary32_identity(in, out, n);
      const Grid g = make_grid(f.fp, 0, false);
      if (o.scale == 1.0f) return run_grid(in, out, n, g, o.rounding, o.seed, offset, stream);
      // Scaled (a recipe's per-tensor scale): in one pass where the grid has a shortcut, else
      // in tiles that stay in L1 across the three loops.
      const float inv = 1.0f / o.scale;
      FastGrid fg;
      if (fast_grid(g, &fg) && o.rounding == Rounding::kNearestEven)
        return rne_fast_scaled(in, out, n, fg, o.scale, inv, stream);
      if (fast_grid(g, &fg) && o.rounding == Rounding::kStochastic)
        return sr_fast_scaled(in, out, n, fg, o.seed, offset, o.scale, inv, stream);
      alignas(64) float buf[4096];
      for (size_t i = 0; i < n; i += 4096) {
        const size_t len = std::min<size_t>(4096, n - i);
        for (size_t j = 0; j < len; ++j) buf[j] = in[i + j] * o.scale;
        run_grid(buf, buf, len, g, o.rounding, o.seed, offset + i);
        for (size_t j = 0; j < len; ++j) out[i + j] = buf[j] * inv;
      }
      return;
    }
    case Format::Kind::kFixed: {
      int64_t kmin, kmax;
      fixed_range(f.fx, &kmin, &kmax);
      return fixed_loop(in, out, n, f.fx.frac_bits, kmin, kmax, f.fx.saturate, o.rounding, o.seed,
                        offset, stream);
    }
    case Format::Kind::kBlock: {
      // `in` starts at a row boundary (see quantize()).
      const size_t row = o.row ? o.row : n;
      if (f.blk.kind == BlockFormat::Kind::kNvfp4)
        return nvfp4_serial(f.blk, in, out, n, row, o.tensor_amax, o.rounding, o.seed, offset,
                            stream, n + ahead);
      const size_t b = size_t(f.blk.block);
      const RceilSubnormals keep(f.blk);
      if (f.blk.element != "int8" || f.blk.kind == BlockFormat::Kind::kBfp) {
        const BlockGrids& bg = block_grids(f.blk);
        switch (o.rounding) {
          case Rounding::kNearestEven:
            return block_rne(in, out, n, row, b, bg, o.seed, offset, stream);
          case Rounding::kTiesAway:
            return block_away(in, out, n, row, b, bg, o.seed, offset, stream);
          case Rounding::kTowardZero:
            return block_rtz(in, out, n, row, b, bg, o.seed, offset, stream);
          case Rounding::kStochastic:
            return block_sr(in, out, n, row, b, bg, o.seed, offset, stream);
        }
      }
      bool lean_int8 = false;
#if TB_AVX512_KERNELS
      lean_int8 = f.blk.kind == BlockFormat::Kind::kMx && (b == 16 || b == 32) && avx512_cpu();
#endif
      // Rows of whole blocks are blocks end to end, as block_rows takes them.
      const size_t rows_of = lean_int8 && row % b == 0 ? n : row;
      for (size_t r0 = 0; r0 < n; r0 += rows_of) {
        const size_t rn = std::min(rows_of, n - r0);
        size_t i = 0;
#if TB_AVX512_KERNELS
        const SrKey key(o.seed);
        const auto lean = [&](auto rounding) {
          constexpr Rounding kR = decltype(rounding)::value;
          const auto run = [&](auto block) {
            constexpr size_t kB = decltype(block)::value;
            return stream ? mx_int8_avx512<kR, kB, true>(in + r0, out + r0, rn, key, offset + r0)
                          : mx_int8_avx512<kR, kB, false>(in + r0, out + r0, rn, key, offset + r0);
          };
          return b == 16 ? run(std::integral_constant<size_t, 16>{})
                         : run(std::integral_constant<size_t, 32>{});
        };
        using NE = std::integral_constant<Rounding, Rounding::kNearestEven>;
        using TA = std::integral_constant<Rounding, Rounding::kTiesAway>;
        using TZ = std::integral_constant<Rounding, Rounding::kTowardZero>;
        using SR = std::integral_constant<Rounding, Rounding::kStochastic>;
        if (lean_int8 && o.rounding == Rounding::kNearestEven)
          i = lean(NE{});
        else if (lean_int8 && o.rounding == Rounding::kTiesAway)
          i = lean(TA{});
        else if (lean_int8 && o.rounding == Rounding::kTowardZero)
          i = lean(TZ{});
        else if (lean_int8 && same_high_word(offset + r0, 0, rn) == rn)
          i = lean(SR{});
#endif
        for (; i < rn; i += b) {
          const size_t len = std::min(b, rn - i);
          block_one(f.blk, in + r0 + i, out + r0 + i, len, o.rounding, o.seed, offset + r0 + i);
        }
      }
      return;
    }
  }
}

}  // namespace

Nvfp4Scales nvfp4_scales(const float* x, size_t n) {
  constexpr size_t kTile = 16;
  const size_t tiles = (n + kTile - 1) / kTile;
  std::vector<uint32_t> amax(tiles);
  bool nan = false;
  uint32_t largest = 0;
  for (size_t t = 0; t < tiles; ++t) {
    amax[t] = amax_bits_nan(x + t * kTile, std::min(kTile, n - t * kTile), &nan);
    largest = std::max(largest, amax[t]);
  }
  // nvfp4_serial's tensor scale from the tiles' largest amax, and its tile scales.
  const float tensor_amax = as_float(largest);
  float s_enc = std::fmin(448.0f * 6.0f / tensor_amax, std::numeric_limits<float>::max());
  if (tensor_amax == 0 || s_enc == 0) s_enc = 1;
  Nvfp4Scales s;
  s.tensor_decode = 1.0f / s_enc;
  std::vector<float> enc(tiles);
  s.block_scale.resize(tiles);
  nvfp4_tile_scales(amax.data(), enc.data(), s.block_scale.data(), tiles, s_enc * (1.0f / 6.0f),
                    s.tensor_decode, nvfp4_grids().scale_fast);
  for (const uint32_t a : amax) s.block_amax.push_back(as_float(a));
  return s;
}

kernel::Grid kernel::float_grid(const FloatFormat& f) { return make_grid(f, 0, false); }

bool kernel::fast_grid(const Grid& g, FastGrid* out) {
  if (g.man_bits > 22 || g.max_bits < 0x00800000u || g.max_bits >= kInfBits) return false;
  FastGrid f;
  f.emin = g.emin;
  f.man_bits = g.man_bits;
  f.below = g.emin - g.man_bits * g.sub;
  f.ecap = int(g.max_bits >> 23) - 127 + 1;
  f.max_bits = g.max_bits;
  f.ovf_bits = g.ovf_bits;
  f.zero_sign = g.zero_sign;
  // Every quantum: below, emin - man_bits up to ecap - man_bits.
  const int qmin = std::min(f.below, f.emin - f.man_bits), qmax = f.ecap - f.man_bits;
  if (qmin < -125 || qmax + 23 > 127) return false;
  // Within these bounds every field below is a normal exponent (1..254).
  f.emin_field = uint32_t(f.emin + 127) << 23;
  f.ecap_field = uint32_t(f.ecap + 127) << 23;
  f.to_addend = uint32_t(23 - f.man_bits) << 23;
  f.below_addend = uint32_t(f.below + 23 + 127) << 23;
  *out = f;
  return true;
}

uint32_t random_bits(uint64_t seed, uint64_t index) {
  const SrKey key(seed);
  return key.bits(uint32_t(index), key.hi(index));
}

int block_exponent(const BlockFormat& f, const float* x, size_t n) {
  const RceilSubnormals keep(f);  // as the block paths compute it
  float amax = 0;
  bool special = false;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (!std::isfinite(a)) {
      special = true;
      continue;
    }
    amax = std::max(amax, a);
  }
  if (f.kind == BlockFormat::Kind::kMx) {
    if (special) return 255;
    if (amax == 0) return 0;  // the smallest scale, 2^-127
    int se = floor_log2(amax) - mx_emax(f);
    if (f.element != "int8" && f.scale_mode != BlockFormat::ScaleMode::kFloor) {
      const FloatFormat& el = mx_element(f.element);
      se = mx_scale_exponent(f.scale_mode, as_bits(amax), floor_log2(amax), el.emax(), el.man_bits,
                             float(1.0 / el.max_finite()));
    }
    return std::min(std::max(se, -127), 127) + 127;
  }
  if (f.kind == BlockFormat::Kind::kNvfp4) return -1;
  const int bias = (1 << (f.scale_bits - 1)) - 1;
  const int lo = std::max(1 - bias, -149 + f.man_bits - 1);
  if (amax == 0) return lo;
  return std::min(std::max(floor_log2(amax), lo), bias);
}

namespace {

// An out-of-place call whose output is larger than the last-level cache is rounded a tile at
// a time into a buffer that stays in L1 and streamed out with non-temporal stores. Plain
// stores make the core read each output line before writing it (12 bytes of traffic per
// element instead of 8), and such an output cannot stay cached anyway. Tiles hold whole rows
// (block formats); results are the same either way.
constexpr size_t kStreamTile = 4096;

#if defined(__SSE2__)
#if TB_AVX512_KERNELS
// Whole 64-byte lines per non-temporal store: a copy through it ran at 31-36 GB/s on two
// cores where 16-byte stores ran at 21-28 (numerics_throughput's reference copy).
template <bool Ahead = false>
TB_AVX512 void stream_out512(const float* in, float* out, size_t n) {
  size_t j = 0;
  for (; j < n && (reinterpret_cast<uintptr_t>(out + j) & 63) != 0; ++j) out[j] = in[j];
  for (; j + 16 <= n; j += 16) {
    ahead16<Ahead>(in + j);
    _mm512_stream_ps(out + j, _mm512_loadu_ps(in + j));
  }
  for (; j < n; ++j) out[j] = in[j];
}
#endif

// Non-temporal stores of 16 bytes from the first 16-byte boundary of `out` (64 where the CPU
// has AVX-512); no fence.
void stream_out(const float* in, float* out, size_t n) {
#if TB_AVX512_KERNELS
  if (avx512_cpu()) return stream_out512(in, out, n);
#endif
  size_t j = 0;
  for (; j < n && (reinterpret_cast<uintptr_t>(out + j) & 15) != 0; ++j) out[j] = in[j];
  for (; j + 4 <= n; j += 4)
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j)));
  for (; j < n; ++j) out[j] = in[j];
}
#endif

// Whether quantize_serial's kernel for (f, o) is one of the AVX-512 kernels, which write a
// streamed output with non-temporal stores themselves (store16). Those overlap the stores'
// drain with the arithmetic, where the tile below is computed in L1 and then streamed out in a
// burst: e4m3 nearest-even on 2 cores of a Xeon VM ran at 19-24 GB/s directly against 14-17
// through the tile (bench/numerics_throughput). Kernels without an AVX-512 form keep the tile.
bool streams_directly(const Format& f, const QuantOptions& o) {
#if TB_AVX512_KERNELS
  if (!avx512_cpu()) return false;
  const bool rne = o.rounding == Rounding::kNearestEven;
  const bool sr = o.rounding == Rounding::kStochastic;
  switch (f.kind) {
    case Format::Kind::kFloat: {
      const Grid g = make_grid(f.fp, 0, false);
      FastGrid fg;
      // Ties-away and toward-zero have fast-grid kernels only, unscaled (quantize_serial's
      // scaled tiles are plain loops): e4m3 on 2 cores of a Zen 5 VM, 24-25 GB/s against 19-21
      // through the tile.
      if (!rne && !sr) return fast_grid(g, &fg) && o.scale == 1.0f;
      return fast_grid(g, &fg) || (shift_grid(g) && o.scale == 1.0f);
    }
    case Format::Kind::kFixed:  // wrap-around: its runs within the range are streamed
      return true;
    case Format::Kind::kBlock: {
      if (f.blk.kind == BlockFormat::Kind::kNvfp4) return f.blk.block == 16;  // every mode
      if (f.blk.block != 16 && f.blk.block != 32) return false;
      // MX int8's kernel (mx_int8_avx512) takes blocks of 16 and 32, in every mode.
      if (f.blk.element == "int8" && f.blk.kind != BlockFormat::Kind::kBfp)
        return f.blk.kind == BlockFormat::Kind::kMx;
      const BlockGrids& bg = block_grids(f.blk);  // block_rows' condition for its AVX-512 rows
      return bg.lo <= 0 && bg.hi >= 0 && bg.fast_ok[size_t(-bg.lo)];
    }
  }
#endif
  return false;
}

void quantize_streaming(const Format& f, const float* in, float* out, size_t n,
                        const QuantOptions& o, uint64_t offset) {
#if defined(__SSE2__)
  // The kernels that write whole lines themselves do so from a 64-byte boundary (LibTorch's
  // allocations start on one; chunks and tiles keep it); the others round a tile into a
  // buffer in L1 and stream it out.
  const bool nvfp4 = f.kind == Format::Kind::kBlock && f.blk.kind == BlockFormat::Kind::kNvfp4;
  const size_t row = o.row ? o.row : n;
  // NVFP4's kernels take whole tiles only: rows of another length go through run_grid's plain
  // stores, which the buffered tile below writes out faster (ties-away, rows of 1000: ~8%).
  const bool direct = streams_directly(f, o) && (reinterpret_cast<uintptr_t>(out) & 63) == 0 &&
                      !(nvfp4 && row % 16 != 0);
  size_t tile = kStreamTile;
  if (f.kind == Format::Kind::kBlock) {
    // NVFP4's tiles span `rows` rows: a band of 16 rows of 1024 is 64 KiB, rounded a band at a
    // time where the kernel streams it itself, else plainly (no buffer holds it). One-row
    // tiles on rows of whole tiles are independent of the rows: bands of one tile then, so
    // that a long row (or the whole tensor as one) is still taken 4096 elements at a time.
    const size_t band = !nvfp4                             ? row
                        : f.blk.rows == 1 && row % 16 == 0 ? 16
                                                           : row * size_t(f.blk.rows);
    if (band > kStreamTile && !direct) return quantize_serial(f, in, out, n, o, offset);
    tile = band > kStreamTile ? band : band * (kStreamTile / band);
  }
  alignas(64) float buf[kStreamTile];
  for (size_t i = 0; i < n; i += tile) {
    const size_t len = std::min(tile, n - i);
    // What of the next tile exists: nvfp4_serial requests the next band's lines itself, a line
    // per tile of the band before. The other direct kernels request theirs 4 KiB ahead as they
    // load (ahead16; not their fallbacks for special blocks). The buffered path requests
    // nothing: a burst of the next tile's lines up front stalled it on 2 cores of a Zen 4 VM
    // (fp:e=8,m=3,bias=140 to nearest even: 33% of copy with the burst, 39% without, one
    // process; the slower generic kernels within 0.3 points either way).
    const size_t ahead = std::min(tile, n - std::min(n, i + tile));
    if (direct && nvfp4) {
      quantize_serial(f, in + i, out + i, len, o, offset + i, true, ahead);
      continue;
    }
    if (direct) {
      quantize_serial(f, in + i, out + i, len, o, offset + i, true);
    } else {
      quantize_serial(f, in + i, buf, len, o, offset + i);
      stream_out(buf, out + i, len);
    }
  }
  _mm_sfence();
#else
  quantize_serial(f, in, out, n, o, offset);
#endif
}

// One thread's share of a call.
void quantize_part(const Format& f, const float* in, float* out, size_t n, const QuantOptions& o,
                   uint64_t offset, bool stream) {
  if (stream) return quantize_streaming(f, in, out, n, o, offset);
  quantize_serial(f, in, out, n, o, offset);
}

}  // namespace

size_t stream_min_elements() {
  static const size_t n = [] {
    long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (bytes <= 0) bytes = 32l << 20;
    return size_t(bytes) / sizeof(float);
  }();
  return n;
}

void copy_nontemporal(const float* in, float* out, size_t n, bool ahead) {
  (void)ahead;  // AVX-512 CPUs only
#if defined(__SSE2__)
#if TB_AVX512_KERNELS
  if (ahead && avx512_cpu()) {
    stream_out512<true>(in, out, n);
    return _mm_sfence();
  }
#endif
  stream_out(in, out, n);
  _mm_sfence();
#else
  std::memcpy(out, in, n * sizeof(float));
#endif
}

void split_over_threads(size_t units, int threads,
                        const std::function<void(size_t, size_t, size_t)>& fn) {
  threads = int(std::min<size_t>(size_t(std::max(threads, 1)), std::max<size_t>(units, 1)));
  if (threads <= 1) return fn(0, 0, units);
  const size_t per = (units + size_t(threads) - 1) / size_t(threads);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < size_t(threads); ++t) {
    const size_t b = t * per, e = std::min(units, b + per);
    if (b >= e) break;
    pool.emplace_back([&fn, t, b, e] { fn(t, b, e); });
  }
  for (auto& th : pool) th.join();
}

TB_NUM_CLONES bool all_finite(const float* x, size_t n) {
  uint32_t special = 0;
  for (size_t i = 0; i < n; ++i) special |= uint32_t((as_bits(x[i]) & kInfBits) == kInfBits);
  return special == 0;
}

float tensor_amax(const float* x, size_t n, int threads) {
  threads = int(std::min<size_t>(size_t(std::max(threads, 1)), n / 65536 + 1));
  // Arrays that may come from memory: the loop that requests its loads ahead.
  const auto amax = [n](const float* p, size_t len) {
#if TB_AVX512_KERNELS
    if (n >= 65536 && avx512_cpu()) return amax_bits_ahead512(p, len);
#endif
    return amax_bits(p, len);
  };
  if (threads <= 1) return as_float(amax(x, n));
  std::vector<uint32_t> part(size_t(threads), 0);
  split_over_threads(n, threads,
                     [&](size_t t, size_t b, size_t e) { part[t] = amax(x + b, e - b); });
  return as_float(*std::max_element(part.begin(), part.end()));
}

void quantize(const Format& f, const float* in, float* out, size_t n, const QuantOptions& given) {
  if (f.kind == Format::Kind::kFloat) validate(f.fp);
  QuantOptions o = given;
  const bool nvfp4 = f.kind == Format::Kind::kBlock && f.blk.kind == BlockFormat::Kind::kNvfp4;
  int threads = o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency());
  // Below ~64K elements a thread costs more than it saves.
  threads = int(std::min<size_t>(size_t(std::max(threads, 1)), n / 65536 + 1));
  // Streaming only where input and output do not overlap at all.
  const size_t stream_above = o.stream_above ? o.stream_above : stream_min_elements();
  const bool stream = n > stream_above && (out + n <= in || in + n <= out);
  // NVFP4's tensor amax: a pass of its own over the input, on the same threads as the rest,
  // where the tensor is split (threads, or the streamed tiles) or the caller wants it; else
  // nvfp4_serial takes it from its tiles' amaxes.
  if (nvfp4 && o.tensor_amax < 0 && (threads > 1 || stream || o.input_amax))
    o.tensor_amax = tensor_amax(in, n, threads);
  if (o.input_amax && f.kind != Format::Kind::kFloat) {
    // A pass of its own (block and fixed-point formats read their input differently); NVFP4
    // already has it unless the caller passed a larger tensor's.
    *o.input_amax = nvfp4 && given.tensor_amax < 0 ? o.tensor_amax : tensor_amax(in, n, threads);
    o.input_amax = nullptr;
  }
  if (o.input_amax) *o.input_amax = 0;
  if (threads <= 1) return quantize_part(f, in, out, n, o, o.offset, stream);
  // Chunks start on a row (block formats) so every block is whole in one chunk.
  size_t unit = 64;
  if (f.kind == Format::Kind::kBlock) {
    const size_t row = o.row ? o.row : n;
    unit = row < n ? row : size_t(f.blk.block);
    if (nvfp4) unit = row < n ? row * size_t(f.blk.rows) : n;  // whole tiles
    // One-row tiles on rows of whole tiles: any tile boundary will do (a tensor rounded as one
    // row is split over the threads too).
    if (nvfp4 && f.blk.rows == 1 && row % 16 == 0) unit = 16;
  }
  QuantOptions part = o;
  // A single row split on block boundaries: each chunk is rows of whole blocks.
  if (f.kind == Format::Kind::kBlock && (o.row == 0 || o.row >= n)) part.row = 0;
  std::vector<float> amax(size_t(threads), 0.0f);
  split_over_threads((n + unit - 1) / unit, threads, [&](size_t t, size_t ub, size_t ue) {
    const size_t b = ub * unit, e = std::min(n, ue * unit);
    QuantOptions mine = part;
    if (o.input_amax) mine.input_amax = &amax[t];
    quantize_part(f, in + b, out + b, e - b, mine, o.offset + b, stream);
  });
  if (o.input_amax) *o.input_amax = *std::max_element(amax.begin(), amax.end());
}

TB_NUM_CLONES void block_amaxes(const float* x, size_t n, size_t block, float* out, bool fold) {
  for (size_t b = 0, lo = 0; lo < n; ++b, lo += block) {
    const float a = as_float(amax_bits_inline(x + lo, std::min(block, n - lo)));
    out[b] = fold ? std::fmax(out[b], a) : a;
  }
}

void quantize_blocks_scaled(const Format& f, const float* in, float* out, size_t n, size_t block,
                            const float* scales, const QuantOptions& given, bool stream) {
  QuantOptions o = given;
  o.input_amax = nullptr;  // quantize()'s option; the scaled blocks' amax is the caller's
  if (f.kind != Format::Kind::kFloat)
    throw std::invalid_argument("quantize_blocks_scaled: float formats only");
  validate(f.fp);
  const Grid g = make_grid(f.fp, 0, false);
  FastGrid fg;
  const bool fast = fast_grid(g, &fg);
  for (size_t b = 0, lo = 0; lo < n; ++b, lo += block) {
    const size_t len = std::min(block, n - lo);
    const float sc = scales[b];
    if (fast && sc != 1.0f && o.rounding == Rounding::kNearestEven) {
      rne_fast_scaled(in + lo, out + lo, len, fg, sc, 1.0f / sc, stream);
    } else if (fast && sc != 1.0f && o.rounding == Rounding::kStochastic) {
      sr_fast_scaled(in + lo, out + lo, len, fg, o.seed, o.offset + lo, sc, 1.0f / sc, stream);
    } else {
      QuantOptions part = o;
      part.scale = sc;
      quantize_serial(f, in + lo, out + lo, len, part, o.offset + lo);
    }
  }
#if defined(__SSE2__)
  if (stream) _mm_sfence();
#endif
}

std::vector<float> quantize(const Format& f, const std::vector<float>& in, const QuantOptions& o) {
  std::vector<float> out(in.size());
  quantize(f, in.data(), out.data(), in.size(), o);
  return out;
}

float quantize_one(const Format& f, float x, Rounding r) {
  QuantOptions o;
  o.rounding = r;
  float y;
  quantize(f, &x, &y, 1, o);
  return y;
}

int64_t encode(const Format& fmt, float q) {
  if (fmt.kind == Format::Kind::kFixed) {
    const auto& f = fmt.fx;
    if (std::isnan(q)) return -1;
    const int64_t k = int64_t(std::ldexp(double(q), f.frac_bits));
    return k & ((int64_t(1) << f.word_bits) - 1);
  }
  if (fmt.kind != Format::Kind::kFloat) return -1;
  const auto& f = fmt.fp;
  const uint32_t b = as_bits(q);
  const uint32_t sign = (b >> 31) & 1u;
  const int nbits = f.exp_bits + f.man_bits;
  const uint32_t top_exp = (1u << f.exp_bits) - 1;
  if (std::isnan(q)) {
    switch (f.special) {
      case Special::kIeee:
        return (int64_t(sign) << nbits) | (top_exp << f.man_bits) | (1u << f.man_bits >> 1);
      case Special::kFn:
        return (int64_t(sign) << nbits) | (top_exp << f.man_bits) | ((1u << f.man_bits) - 1);
      case Special::kFnuz:
        return int64_t(1) << nbits;
      case Special::kNone:
        return -1;
    }
  }
  const uint32_t s = int64_t(f.special == Special::kFnuz && q == 0 ? 0 : sign) << nbits;
  if (std::isinf(q)) return f.has_inf() ? int64_t(s | (top_exp << f.man_bits)) : -1;
  const double a = std::fabs(double(q));
  if (a == 0) return s;
  int e = floor_log2(float(a));
  if (e < f.emin()) {  // subnormal: mantissa = a / 2^(emin - m)
    return s | uint32_t(std::ldexp(a, f.man_bits - f.emin()));
  }
  const uint32_t m = uint32_t(std::ldexp(a, f.man_bits - e)) - (1u << f.man_bits);
  return s | (uint32_t(e + f.bias) << f.man_bits) | m;
}

float decode(const FloatFormat& f, uint32_t code) {
  const int nbits = f.exp_bits + f.man_bits;
  const uint32_t sign = (code >> nbits) & 1u;
  const uint32_t ef = (code >> f.man_bits) & ((1u << f.exp_bits) - 1);
  const uint32_t mf = code & ((1u << f.man_bits) - 1);
  const uint32_t top = (1u << f.exp_bits) - 1;
  const double sg = sign ? -1.0 : 1.0;
  switch (f.special) {
    case Special::kIeee:
      if (ef == top) return mf ? std::nanf("") : float(sg * INFINITY);
      break;
    case Special::kFn:
      if (ef == top && mf == (1u << f.man_bits) - 1) return std::nanf("");
      break;
    case Special::kFnuz:
      if (sign && ef == 0 && mf == 0) return std::nanf("");
      break;
    case Special::kNone:
      break;
  }
  double v;
  if (ef == 0)
    v = f.subnormals ? std::ldexp(double(mf), f.emin() - f.man_bits) : 0.0;
  else
    v = std::ldexp(double(mf | (1u << f.man_bits)), int(ef) - f.bias - f.man_bits);
  return float(sg * v);
}

float decode(const FixedFormat& f, uint32_t code) {
  int64_t k = code & ((int64_t(1) << f.word_bits) - 1);
  if (f.is_signed && (k >> (f.word_bits - 1))) k -= int64_t(1) << f.word_bits;
  return float(std::ldexp(double(k), -f.frac_bits));
}

}  // namespace tb::num
