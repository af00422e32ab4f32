// round_bits.h's kernels on 16 lanes of AVX-512, for the loops written with intrinsics
// (quantize.cc's stochastic and block loops, mad.cc's lean kernel): GCC's vectorisation of the
// scalar kernels spends a third of its instructions on 64-bit counters and on constants it
// spills and broadcasts again. Same bits as the scalar kernels. Internal to the numerics
// library; x86-64 GCC only (TB_AVX512_KERNELS; round_bits.h's TB_X86_KERNELS), taken where
// avx512_cpu() says so.
#pragma once
#include <type_traits>

#include "numerics/round_bits.h"

#if TB_X86_KERNELS
#include <immintrin.h>
#define TB_AVX512_KERNELS 1
// F16C with AVX-512 F: every AVX-512 CPU has both; the MAD kernel's fp16 sums use F16C.
#define TB_AVX512 __attribute__((target("avx512f,f16c")))
#define TB_AVX512_INLINE inline __attribute__((target("avx512f,f16c"), always_inline))

namespace tb::num::kernel {

inline bool avx512_cpu() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
  return yes;
}

// Calls f(Stream, NegZero), two std::bool_constant, for a streamed output (store16) and a grid
// whose zero_sign says it has -0 (the signed kernels): where each kernel's instances are
// chosen, in one place.
template <typename F>
decltype(auto) with_instance(bool stream, uint32_t zero_sign, F&& f) {
  using Yes = std::true_type;
  using No = std::false_type;
  if (zero_sign == 0x80000000u) return stream ? f(Yes{}, Yes{}) : f(No{}, Yes{});
  return stream ? f(Yes{}, No{}) : f(No{}, No{});
}

TB_AVX512_INLINE __m512i splat(uint32_t v) { return _mm512_set1_epi32(int(v)); }

// SrKey's hash (hash32), on 16 words.
TB_AVX512_INLINE __m512i hash32_512(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, splat(0x7feb352du));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, splat(0x846ca68bu));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// With Stream (an input past the last-level cache, read once), the line 4 KiB past x is
// requested as x's vector is loaded: one line per vector, spread over the loop. Before, each
// 16 KiB tile's successor was requested in a burst up front; on 2 cores of a Zen 4 VM that
// burst stalled the kernels (1280 MiB, five runs interleaved in one process, % of copy): e4m3
// toward zero 53 -> 83, bf16 stochastic 50 -> 76, e5m2 stochastic 41 -> 56, bfp8 stochastic
// 31 -> 41. Requesting nothing matched this within a point on the float kernels and lost 1-7
// points on the block ones (they read a group twice); 16 KiB ahead lost up to 6 points against
// 4 KiB (docs/results/numerics-speed.md). A Zen 5 VM had run 17-80% faster with the burst than
// with nothing, and no faster with the requests spread (not measured there with this form).
// The address may lie past the input: a prefetch never faults.
template <bool Stream>
TB_AVX512_INLINE void ahead16(const float* x) {
  if constexpr (Stream)
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x) + 4096), _MM_HINT_T0);
}

// The live lanes of v stored at y: with Stream, a whole vector that fills y's 64-byte line goes
// out with a non-temporal store (an output past the last-level cache: no read of the line
// first, and the line drains to memory while the next vectors compute, which a tile written
// to L1 and then streamed out in a burst did not overlap); else a plain store.
template <bool Stream>
TB_AVX512_INLINE void store16(float* y, __m512 v, __mmask16 live) {
  if constexpr (Stream)
    if (live == __mmask16(0xFFFF) && (reinterpret_cast<uintptr_t>(y) & 63) == 0)
      return _mm512_stream_ps(y, v);
  _mm512_mask_storeu_ps(y, live, v);
}

// The last steps of round_bits.h's kernels on 16 lanes: a magnitude above max, or an Inf input,
// becomes ovf; a zero keeps the input's sign where the format has -0 (zero_sign); a NaN input
// becomes the quiet NaN of its sign. `a` is |x|'s bits, `sign` x's sign bit.
TB_AVX512_INLINE __m512i finish512(__m512i mag, __m512i a, __m512i sign, __m512i max, __m512i ovf,
                                   __m512i zero_sign) {
  const __m512i inf = splat(kInfBits);
  const __mmask16 over = _mm512_cmpgt_epu32_mask(mag, max) | _mm512_cmpeq_epi32_mask(a, inf);
  mag = _mm512_mask_mov_epi32(mag, over, ovf);
  const __m512i keep =
      _mm512_mask_mov_epi32(zero_sign, _mm512_test_epi32_mask(mag, mag), splat(0x80000000u));
  const __m512i res = _mm512_or_si512(mag, _mm512_and_si512(sign, keep));
  return _mm512_mask_mov_epi32(res, _mm512_cmpgt_epu32_mask(a, inf),
                               _mm512_or_si512(sign, splat(kQuietNan)));
}

// finish512 on a grid with -0 (zero_sign the sign bit): the input's sign (from its bits xb)
// goes back onto every result with one ternary-logic operation, 7 operations where finish512
// takes 11.
TB_AVX512_INLINE __m512i finish512_signed(__m512i mag, __m512i xb, __m512i a, __m512i max,
                                          __m512i ovf) {
  const __m512i inf = splat(kInfBits);
  const __mmask16 over = _mm512_cmpgt_epu32_mask(mag, max) | _mm512_cmpeq_epi32_mask(a, inf);
  mag = _mm512_mask_mov_epi32(mag, over, ovf);
  mag = _mm512_mask_mov_epi32(mag, _mm512_cmpgt_epu32_mask(a, inf), splat(kQuietNan));
  return _mm512_ternarylogic_epi32(mag, xb, splat(0x80000000u), 0xF8);
}

// finish512 or finish512_signed, as the grid has -0 or not.
template <bool NegZero>
TB_AVX512_INLINE __m512i finish512_for(__m512i mag, __m512i xb, __m512i a, __m512i max, __m512i ovf,
                                       __m512i zero_sign) {
  if constexpr (NegZero) return finish512_signed(mag, xb, a, max, ovf);
  return finish512(mag, a, _mm512_xor_si512(xb, a), max, ovf, zero_sign);
}

// A FastGrid's fields, broadcast.
struct Fast512 {
  __m512i ecap, emin, to_add, below_add, max, ovf, zero_sign;
};

TB_AVX512_INLINE Fast512 fast512(const FastGrid& g) {
  return {splat(g.ecap_field), splat(g.emin_field), splat(g.to_addend), splat(g.below_addend),
          splat(g.max_bits),   splat(g.ovf_bits),   splat(g.zero_sign)};
}

// round_nearest_even_fast on 16 lanes. Finite: no lane is Inf or NaN (the caller knows), so
// their checks go.
template <bool Finite>
TB_AVX512_INLINE __m512 round_nearest_even_fast512(__m512 x, const Fast512& g) {
  const __m512i inf = splat(kInfBits);
  const __m512i xb = _mm512_castps_si512(x);
  const __m512i a = _mm512_and_si512(xb, splat(0x7FFFFFFFu));
  const __m512i sign = _mm512_xor_si512(xb, a);
  const __m512i e = _mm512_and_si512(a, inf);
  const __m512i capped = _mm512_min_epu32(e, g.ecap);
  const __mmask16 normal = _mm512_cmpge_epu32_mask(e, g.emin);
  const __m512 c =
      _mm512_castsi512_ps(_mm512_mask_add_epi32(g.below_add, normal, capped, g.to_add));
  __m512i mag = _mm512_castps_si512(_mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), c), c));
  __mmask16 over = _mm512_cmpgt_epu32_mask(mag, g.max);
  if constexpr (!Finite) over |= _mm512_cmpeq_epi32_mask(a, inf);
  mag = _mm512_mask_mov_epi32(mag, over, g.ovf);
  const __m512i keep =
      _mm512_mask_mov_epi32(g.zero_sign, _mm512_test_epi32_mask(mag, mag), splat(0x80000000u));
  __m512i out = _mm512_or_si512(mag, _mm512_and_si512(sign, keep));
  if constexpr (!Finite)
    out = _mm512_mask_mov_epi32(out, _mm512_cmpgt_epu32_mask(a, inf),
                                _mm512_or_si512(sign, splat(kQuietNan)));
  return _mm512_castsi512_ps(out);
}

// round_nearest_even_fast512 on a grid with -0 (zero_sign the sign bit), computed on the signed
// value: rounding to nearest even is symmetric, so (x + c') - c' with c' = c carrying x's sign
// is the negated magnitude for negative x, a zero result (+0 from the subtraction) takes x's
// sign back with the final or, and so does the overflow value. Inf passes through the sums
// and overflows; NaN (Finite false) becomes the quiet NaN before the sign goes back. Same bits
// in 11 operations (13 with NaN) where the magnitude's form takes 14 (17).
template <bool Finite>
TB_AVX512_INLINE __m512 round_nearest_even_fast512_signed(__m512 x, const Fast512& g) {
  const __m512i sign_bit = splat(0x80000000u);
  const __m512i xb = _mm512_castps_si512(x);
  const __m512i e = _mm512_and_si512(xb, splat(kInfBits));
  const __m512i capped = _mm512_min_epu32(e, g.ecap);
  const __mmask16 normal = _mm512_cmpge_epu32_mask(e, g.emin);
  const __m512i c = _mm512_mask_add_epi32(g.below_add, normal, capped, g.to_add);
  const __m512 cs = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(c, xb, sign_bit, 0xF8));
  __m512i mag = _mm512_castps_si512(_mm512_sub_ps(_mm512_add_ps(x, cs), cs));
  const __mmask16 over = _mm512_cmpgt_epu32_mask(_mm512_andnot_si512(sign_bit, mag), g.max);
  mag = _mm512_mask_mov_epi32(mag, over, g.ovf);
  if constexpr (!Finite)
    mag = _mm512_mask_mov_epi32(mag, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), splat(kQuietNan));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(mag, xb, sign_bit, 0xF8));
}

// The kernel for a grid: the signed form where it has -0.
template <bool Finite, bool NegZero>
TB_AVX512_INLINE __m512 round_nearest_even_fast512_for(__m512 x, const Fast512& g) {
  if constexpr (NegZero) return round_nearest_even_fast512_signed<Finite>(x, g);
  return round_nearest_even_fast512<Finite>(x, g);
}

}  // namespace tb::num::kernel
#else
#define TB_AVX512_KERNELS 0
#endif
