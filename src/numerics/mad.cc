#include "numerics/mad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/errors.h"
#include "numerics/quantize.h"
#include "numerics/round_avx512.h"
#include "numerics/round_bits.h"

namespace tb::num {
namespace {

using kernel::as_bits;
using kernel::as_float;

// Round to odd: truncate toward zero and set the last bit when anything was lost. A value
// rounded to odd with two or more spare bits rounds correctly to the narrower format.
inline float odd_from(float s, float err) {
  if (err == 0 || !std::isfinite(s)) return s;
  const bool beyond = (err > 0) == (s > 0);  // the exact value is farther from zero than s
  return as_float((beyond ? as_bits(s) : as_bits(s) - 1) | 1u);
}

inline float odd_product(float a, float b) {
  const double d = double(a) * double(b);  // exact: 24 + 24 bits
  const float f = float(d);
  return odd_from(f, float(d - double(f)));
}

inline float odd_sum(float a, float b) {
  const float s = a + b;  // TwoSum: err is the exact rounding error of s
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  return odd_from(s, err);
}

// Too many significant bits for rounding to odd through float32 to stay exact.
bool wide(const Format& f) {
  return f.kind == Format::Kind::kFloat ? f.fp.man_bits > 21 : f.fx.word_bits > 22;
}

struct Rounder {
  const Format& f;
  QuantOptions o;
  bool plain;  // fp32 itself: float32 arithmetic is the format
  void operator()(float* v, size_t n, uint64_t offset) {
    if (plain) return;
    o.offset = offset;
    quantize(f, v, v, n, o);
  }
};

void rows(const MadUnit& u, const float* A, const float* B, float* C, int64_t r0, int64_t r1,
          int64_t N, int64_t K) {
  const int64_t W = std::max(1, u.width);
  const int lanes = u.order == MadUnit::Order::kLanes ? int(W) : 1;
  std::vector<float> acc(static_cast<size_t>(lanes * N)), prod(static_cast<size_t>(N)),
      group(static_cast<size_t>(W * N));
  QuantOptions qo;
  qo.rounding = u.rounding;
  qo.seed = 0x5eed;
  Rounder rp{u.product, qo, u.product == Format{}},
      ra{u.accumulator, qo, u.accumulator == Format{}};
  const bool odd_p = !wide(u.product), odd_a = !wide(u.accumulator);
  uint64_t draw = 0;  // stochastic rounding: a fresh stream position per rounded vector
  auto add_into = [&](float* dst, const float* src) {
    for (int64_t j = 0; j < N; ++j) dst[j] = odd_a ? odd_sum(dst[j], src[j]) : dst[j] + src[j];
    ra(dst, size_t(N), (draw++) * uint64_t(N));
  };
  // Pairwise tree over `count` vectors stored back to back in v; the sum ends in v[0].
  auto tree = [&](float* v, int64_t count) {
    for (int64_t step = 1; step < count; step *= 2)
      for (int64_t a = 0; a + step < count; a += 2 * step) add_into(v + a * N, v + (a + step) * N);
  };
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k0 = 0; k0 < K; k0 += W) {
      const int64_t kn = std::min(W, K - k0);
      for (int64_t t = 0; t < kn; ++t) {
        const float a = A[i * K + k0 + t];
        const float* b = B + (k0 + t) * N;
        float* p = u.order == MadUnit::Order::kTree ? group.data() + t * N : prod.data();
        for (int64_t j = 0; j < N; ++j) p[j] = odd_p ? odd_product(a, b[j]) : a * b[j];
        rp(p, size_t(N), (draw++) * uint64_t(N));
        if (u.order == MadUnit::Order::kSequential) add_into(acc.data(), p);
        if (u.order == MadUnit::Order::kLanes) add_into(acc.data() + t * N, p);
      }
      if (u.order == MadUnit::Order::kTree) {
        tree(group.data(), kn);
        add_into(acc.data(), group.data());
      }
    }
    if (u.order == MadUnit::Order::kLanes) tree(acc.data(), lanes);
    std::copy(acc.begin(), acc.begin() + N, C + i * N);
  }
}

// --- The fused kernel ---------------------------------------------------------------------
// The same arithmetic as rows() for every element of C, term by term and in the same order, but
// with the rounding done inline by the float-grid kernel instead of a quantize() call per
// vector of N, and the loops blocked: a tile of kTileN columns of C is computed for one row
// at a time, its accumulators in L1 and the tile of B it reads in L1/L2. Each operation
// is branch-free, so the loops over a tile's columns vectorise (AVX-512 where the CPU has it).
// It serves the float formats whose rounding is deterministic; stochastic rounding (whose
// random stream follows rows()' call order) and fixed-point formats take rows().

using kernel::as_bits;
using kernel::as_float;
using kernel::Grid;
using kernel::sel;

constexpr int64_t kTileN = 256;

// odd_from() without branches: the same comparisons, as selects.
TB_INLINE float odd_from_bf(float s, float err) {
  const uint32_t sb = as_bits(s);
  const bool keep = (err == 0) | ((sb & 0x7FFFFFFFu) >= kernel::kInfBits);
  const bool beyond = (err > 0) == (s > 0);
  return as_float(sel(keep, sb, (sb - uint32_t(!beyond)) | 1u));
}

// PP / PA: the product / accumulator format is fp32 itself (float32 arithmetic, no rounding).
// Fma: the product's rounding error from a fused multiply-add (TwoProduct) rather than from
// the exact product in double; the same float32 value (a * b - f is exact in double, and the
// FMA rounds the same exact value once; flush-to-zero flushes both the same way), in two
// instructions where the double route takes a dozen conversions and products.
template <Rounding R, bool PP, bool Fma, typename G>
TB_INLINE float fused_product(float a, float b, const G& gp) {
  if constexpr (PP) {
    return a * b;
  } else if constexpr (Fma) {
    const float f = a * b;
    const float odd = odd_from_bf(f, std::fma(a, b, -f));
    return as_float(kernel::round_on<R>(as_bits(odd), gp, 0));
  } else {
    const double d = double(a) * double(b);
    const float f = float(d);
    const float odd = odd_from_bf(f, float(d - double(f)));
    return as_float(kernel::round_on<R>(as_bits(odd), gp, 0));
  }
}

template <Rounding R, bool PA, typename G>
TB_INLINE float fused_sum(float a, float b, const G& ga) {
  if constexpr (PA) {
    return a + b;
  } else {
    const float s = a + b;
    const float bb = s - a;
    const float err = (a - (s - bb)) + (b - bb);
    return as_float(kernel::round_on<R>(as_bits(odd_from_bf(s, err)), ga, 0));
  }
}

// The three vector operations of a dot-product tile; GP / GA: the grid types (Grid, or
// FastGrid for the shortcut).
template <Rounding R, bool PP, bool PA, bool Fma, typename GP, typename GA>
struct TileBody {
  // acc = S(acc + P(a * b)), elementwise.
  TB_INLINE static void mac(float* __restrict acc, float a, const float* __restrict b, int64_t n,
                            const GP& gp, const GA& ga) {
    const GP p = gp;
    const GA s = ga;
    for (int64_t j = 0; j < n; ++j)
      acc[j] = fused_sum<R, PA>(acc[j], fused_product<R, PP, Fma>(a, b[j], p), s);
  }
  // dst = P(a * b)
  TB_INLINE static void mul(float* __restrict dst, float a, const float* __restrict b, int64_t n,
                            const GP& gp) {
    const GP p = gp;
    for (int64_t j = 0; j < n; ++j) dst[j] = fused_product<R, PP, Fma>(a, b[j], p);
  }
  // dst = S(dst + src)
  TB_INLINE static void add(float* __restrict dst, const float* __restrict src, int64_t n,
                            const GA& ga) {
    const GA s = ga;
    for (int64_t j = 0; j < n; ++j) dst[j] = fused_sum<R, PA>(dst[j], src[j], s);
  }
};

// Compiled for every SIMD level, with the products' error from double precision.
template <Rounding R, bool PP, bool PA, typename GP, typename GA>
struct TileOps {
  using Body = TileBody<R, PP, PA, false, GP, GA>;
  TB_NUM_CLONES static void mac(float* __restrict acc, float a, const float* __restrict b,
                                int64_t n, const GP& gp, const GA& ga) {
    Body::mac(acc, a, b, n, gp, ga);
  }
  TB_NUM_CLONES static void mul(float* __restrict dst, float a, const float* __restrict b,
                                int64_t n, const GP& gp) {
    Body::mul(dst, a, b, n, gp);
  }
  TB_NUM_CLONES static void add(float* __restrict dst, const float* __restrict src, int64_t n,
                                const GA& ga) {
    Body::add(dst, src, n, ga);
  }
};

// AVX-512 only, which has FMA (the AVX2 clone above may run where FMA is a library call).
#if TB_X86_KERNELS
#define TB_MAD_FMA_TARGET __attribute__((target("avx512f")))
#define TB_MAD_HAS_FMA_PATH 1
#else
#define TB_MAD_FMA_TARGET
#define TB_MAD_HAS_FMA_PATH 0
#endif
template <Rounding R, bool PP, bool PA, typename GP, typename GA>
struct TileOpsFma {
  using Body = TileBody<R, PP, PA, true, GP, GA>;
  TB_MAD_FMA_TARGET static void mac(float* __restrict acc, float a, const float* __restrict b,
                                    int64_t n, const GP& gp, const GA& ga) {
    Body::mac(acc, a, b, n, gp, ga);
  }
  TB_MAD_FMA_TARGET static void mul(float* __restrict dst, float a, const float* __restrict b,
                                    int64_t n, const GP& gp) {
    Body::mul(dst, a, b, n, gp);
  }
  TB_MAD_FMA_TARGET static void add(float* __restrict dst, const float* __restrict src, int64_t n,
                                    const GA& ga) {
    Body::add(dst, src, n, ga);
  }
};

// Whether this CPU runs the FMA instances (checked once).
bool use_fma_path() {
#if TB_MAD_HAS_FMA_PATH
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}

// Both grids of a unit, in both representations.
struct UnitGrids {
  Grid gp{}, ga{};
  kernel::FastGrid fp{}, fa{};
  bool fast_p = false, fast_a = false;
};

// Pairwise tree over `count` tiles of kTileN stored back to back in v; the sum ends in v[0].
template <typename Ops>
void tile_tree(const Ops& ops, float* v, int64_t count, int64_t n) {
  for (int64_t step = 1; step < count; step *= 2)
    for (int64_t a = 0; a + step < count; a += 2 * step)
      ops.add(v + a * kTileN, v + (a + step) * kTileN, n);
}

// The loops of a unit over a band of rows, on a tile operations object (mac, mul, add over n
// columns, one call per tile): the fused kernel's and the lean kernel's.
template <typename Ops>
void tile_rows(const MadUnit& u, const float* A, const float* B, float* C, int64_t r0, int64_t r1,
               int64_t N, int64_t K, const Ops& ops) {
  const int64_t W = std::max(1, u.width);
  const int64_t T = kTileN;
  const int64_t lanes = u.order == MadUnit::Order::kLanes ? W : 1;
  // Accumulators (lane t at acc + t * T) and, for the tree order, a group of W products.
  std::vector<float> acc_v(size_t(lanes * T)), group_v(size_t(W * T));
  float* acc = acc_v.data();
  float* group = group_v.data();
  for (int64_t j0 = 0; j0 < N; j0 += T) {
    const int64_t n = std::min(T, N - j0);
    for (int64_t i = r0; i < r1; ++i) {
      const float* a_row = A + i * K;
      std::fill(acc, acc + lanes * T, 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += W) {
        const int64_t kn = std::min(W, K - k0);
        switch (u.order) {
          case MadUnit::Order::kSequential:
            for (int64_t t = 0; t < kn; ++t) ops.mac(acc, a_row[k0 + t], B + (k0 + t) * N + j0, n);
            break;
          case MadUnit::Order::kLanes:
            for (int64_t t = 0; t < kn; ++t)
              ops.mac(acc + t * T, a_row[k0 + t], B + (k0 + t) * N + j0, n);
            break;
          case MadUnit::Order::kTree:
            for (int64_t t = 0; t < kn; ++t)
              ops.mul(group + t * T, a_row[k0 + t], B + (k0 + t) * N + j0, n);
            tile_tree(ops, group, kn, n);
            ops.add(acc, group, n);
            break;
        }
      }
      if (u.order == MadUnit::Order::kLanes) tile_tree(ops, acc, lanes, n);
      std::copy(acc, acc + n, C + i * N + j0);
    }
  }
}

// TileOps or TileOpsFma with the unit's grids.
template <typename T, typename GP, typename GA>
struct FusedOps {
  const GP& gp;
  const GA& ga;
  void mac(float* acc, float a, const float* b, int64_t n) const { T::mac(acc, a, b, n, gp, ga); }
  void mul(float* dst, float a, const float* b, int64_t n) const { T::mul(dst, a, b, n, gp); }
  void add(float* dst, const float* src, int64_t n) const { T::add(dst, src, n, ga); }
};

template <Rounding R, bool PP, bool PA, bool Fma, typename GP, typename GA>
void fused_rows(const MadUnit& u, const float* A, const float* B, float* C, int64_t r0, int64_t r1,
                int64_t N, int64_t K, const GP& gp, const GA& ga) {
  using Ops = std::conditional_t<Fma, TileOpsFma<R, PP, PA, GP, GA>, TileOps<R, PP, PA, GP, GA>>;
  tile_rows(u, A, B, C, r0, r1, N, K, FusedOps<Ops, GP, GA>{gp, ga});
}

// --- The lean kernel --------------------------------------------------------------------
// Where the operands allow it, two of the fused kernel's steps compute nothing and are left
// out, with the same result for every element (NumericsMad tests compare it with the scalar
// definition):
// - Exact products. When the operands' significands are short enough (their significant bits
//   sum to <= 24) and every nonzero product lies in float32's normal range, a * b in float32
//   is the exact product: the rounding error the fused kernel computes is 0, rounding to odd
//   leaves the product as it is, and a finite product needs no Inf or NaN check. Operands
//   quantized to an 8-bit format (e5m2: 3 significant bits) always qualify unless their
//   magnitudes span more than float32's range.
// - Sums rounded once through float32. When both addends lie on the accumulator's grid (the
//   accumulators do by construction; the rounded products do when the product format's grid is
//   a subset of the accumulator's) and the accumulator has at most 11 significant bits,
//   rounding the float32 sum to the accumulator to nearest even gives the correctly rounded
//   exact sum: double rounding is innocuous when the wider precision is at least 2p + 2
//   (Figueroa, "When is double rounding innocuous?", SIGNUM 1995), and 24 >= 2 * 11 + 2. The
//   TwoSum and the rounding to odd go. An IEEE binary16 accumulator then rounds by the F16C
//   conversion instructions, which are the same function on float32 as its FastGrid rounding
//   for every non-NaN input and every NaN the kernel can meet (checked over all 2^32 inputs
//   when written; inputs are finite, so the only NaNs are Inf - Inf's default one and a
//   product format's own overflow NaN, both propagated unchanged).
// Written with AVX-512 intrinsics: the fused kernel's auto-vectorised loop spends ~100
// instructions per 16 products and sums, this one ~20.

// What mad_matmul learns of an operand in one pass: whether every element is finite and
// normal (or zero), the most significant bits any of them has, and the range of their
// exponents.
struct OperandFacts {
  bool normal = true;             // no Inf, NaN or float32 subnormal
  int sig_bits = 0;               // most significant bits of any element (0: all zero)
  int emin = 1000, emax = -1000;  // floor(log2 |x|) over the nonzero elements
};

[[maybe_unused]] OperandFacts facts_of(const float* v, int64_t n) {
  uint32_t mant_or = 0, be_min = 255, be_max = 0, odd = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = as_bits(v[i]) & 0x7FFFFFFFu, be = a >> 23;
    const bool nonzero = a != 0;
    odd |= uint32_t(nonzero & ((be == 0) | (be == 255)));
    mant_or |= a & 0x7FFFFFu;  // the lowest set bit over all elements bounds every significand
    be_min = std::min(be_min, nonzero ? be : 255u);
    be_max = std::max(be_max, be);
  }
  OperandFacts f;
  f.normal = odd == 0;
  if (be_max == 0) return f;
  f.sig_bits = mant_or == 0 ? 1 : 24 - __builtin_ctz(mant_or);
  f.emin = int(be_min) - 127;
  f.emax = int(be_max) - 127;
  return f;
}

// Every product of an element of a and one of b is exact in float32 and, if nonzero, normal.
[[maybe_unused]] bool exact_products(const OperandFacts& a, const OperandFacts& b) {
  if (!a.normal || !b.normal) return false;
  if (a.sig_bits == 0 || b.sig_bits == 0) return true;
  // |x| < 2^(emax + 1): the product is below 2^(emax_a + emax_b + 2) and at least
  // 2^(emin_a + emin_b).
  return a.sig_bits + b.sig_bits <= 24 && a.emin + b.emin >= -126 && a.emax + b.emax + 2 <= 128;
}

// Every value of grid p is a value of grid a (the formats' maxima included).
[[maybe_unused]] bool grid_within(const Grid& p, const Grid& a) {
  if (p.man_bits > a.man_bits || a.sub != 1) return false;
  // The smallest quantum of either grid is its lowest binade's, the subnormals' too.
  if (p.emin - p.man_bits < a.emin - a.man_bits) return false;
  return as_float(p.max_bits) <= as_float(a.max_bits);
}

[[maybe_unused]] bool ieee_half(const Grid& g) {
  return g.emin == -14 && g.man_bits == 10 && g.sub == 1 && g.max_bits == as_bits(65504.0f) &&
         g.ovf_bits == kernel::kInfBits && g.zero_sign == 0x80000000u;
}

enum class LeanProduct { kPlain, kGrid };
enum class LeanSum { kPlain, kHalf, kGrid };

#if TB_AVX512_KERNELS
// GCC 12 reports the undefined vectors its own masked-load and conversion intrinsics start
// from (_mm512_undefined_*) as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

template <LeanProduct P>
TB_AVX512_INLINE __m512 lean_product(__m512 a, __m512 b, const kernel::Fast512& g) {
  const __m512 p = _mm512_mul_ps(a, b);
  if constexpr (P == LeanProduct::kPlain) {
    return p;
  } else {
    return kernel::round_nearest_even_fast512<true>(p, g);
  }
}

template <LeanSum S>
TB_AVX512_INLINE __m512 lean_sum(__m512 a, __m512 b, const kernel::Fast512& g) {
  const __m512 s = _mm512_add_ps(a, b);
  if constexpr (S == LeanSum::kPlain) {
    return s;
  } else if constexpr (S == LeanSum::kHalf) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    return kernel::round_nearest_even_fast512<false>(s, g);
  }
}

TB_AVX512_INLINE __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

// The fused kernel's three tile operations, each one call over n columns (as TileOps'): the
// grids' constants are broadcast once per call.
template <LeanProduct P, LeanSum S>
struct LeanOps {
  const kernel::FastGrid &fp, &fa;
  // acc = S(acc + P(a * b))
  TB_AVX512 void mac(float* acc, float a, const float* b, int64_t n) const {
    const kernel::Fast512 gp = kernel::fast512(fp), ga = kernel::fast512(fa);
    const __m512 av = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      const __m512 p = lean_product<P>(av, _mm512_maskz_loadu_ps(m, b + j), gp);
      _mm512_mask_storeu_ps(acc + j, m, lean_sum<S>(_mm512_maskz_loadu_ps(m, acc + j), p, ga));
    }
  }
  // dst = P(a * b)
  TB_AVX512 void mul(float* dst, float a, const float* b, int64_t n) const {
    const kernel::Fast512 gp = kernel::fast512(fp);
    const __m512 av = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      _mm512_mask_storeu_ps(dst + j, m, lean_product<P>(av, _mm512_maskz_loadu_ps(m, b + j), gp));
    }
  }
  // dst = S(dst + src)
  TB_AVX512 void add(float* dst, const float* src, int64_t n) const {
    const kernel::Fast512 ga = kernel::fast512(fa);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      const __m512 s =
          lean_sum<S>(_mm512_maskz_loadu_ps(m, dst + j), _mm512_maskz_loadu_ps(m, src + j), ga);
      _mm512_mask_storeu_ps(dst + j, m, s);
    }
  }
};

// fused_rows' loops, on LeanOps.
template <LeanProduct P, LeanSum S>
void lean_rows(const MadUnit& u, const float* A, const float* B, float* C, int64_t r0, int64_t r1,
               int64_t N, int64_t K, const UnitGrids& g) {
  tile_rows(u, A, B, C, r0, r1, N, K, LeanOps<P, S>{g.fp, g.fa});
}

#pragma GCC diagnostic pop
#endif

using FusedFn = void (*)(const MadUnit&, const float*, const float*, float*, int64_t, int64_t,
                         int64_t, int64_t, const UnitGrids&);

template <bool First, typename A, typename B>
const auto& pick(const A& a, const B& b) {
  if constexpr (First) {
    return a;
  } else {
    return b;
  }
}

// fused_rows with the unit's grids in the representation the instance takes.
template <Rounding R, bool PP, bool PA, bool FP, bool FA, bool Fma>
void fused_with(const MadUnit& u, const float* A, const float* B, float* C, int64_t r0, int64_t r1,
                int64_t N, int64_t K, const UnitGrids& g) {
  using GP = std::conditional_t<FP, kernel::FastGrid, Grid>;
  using GA = std::conditional_t<FA, kernel::FastGrid, Grid>;
  fused_rows<R, PP, PA, Fma, GP, GA>(u, A, B, C, r0, r1, N, K, pick<FP>(g.fp, g.gp),
                                     pick<FA>(g.fa, g.ga));
}

template <Rounding R, bool FP, bool FA, bool Fma>
FusedFn fused_for_fma(bool pp, bool pa) {
  if (pp)
    return pa ? fused_with<R, true, true, FP, FA, Fma> : fused_with<R, true, false, FP, FA, Fma>;
  return pa ? fused_with<R, false, true, FP, FA, Fma> : fused_with<R, false, false, FP, FA, Fma>;
}

// Products in fp32 need no error term: the FMA instances only serve rounded products.
template <Rounding R, bool FP, bool FA>
FusedFn fused_for(bool pp, bool pa) {
  if (!pp && use_fma_path()) return fused_for_fma<R, FP, FA, true>(pp, pa);
  return fused_for_fma<R, FP, FA, false>(pp, pa);
}

// The fused kernel for this unit, with its grids in *g, or null where rows() must do it.
FusedFn fused_kernel(const MadUnit& u, UnitGrids* g) {
  const auto usable = [](const Format& f) {
    return f == Format{} || (f.kind == Format::Kind::kFloat && !wide(f));
  };
  if (!usable(u.product) || !usable(u.accumulator)) return nullptr;
  const bool pp = u.product == Format{}, pa = u.accumulator == Format{};
  // quantize() checks the format on every call; rows() would have thrown here.
  if (!pp) {
    validate(u.product.fp);
    g->gp = kernel::float_grid(u.product.fp);
    g->fast_p = kernel::fast_grid(g->gp, &g->fp);
  }
  if (!pa) {
    validate(u.accumulator.fp);
    g->ga = kernel::float_grid(u.accumulator.fp);
    g->fast_a = kernel::fast_grid(g->ga, &g->fa);
  }
  switch (u.rounding) {
    case Rounding::kNearestEven:
      if (g->fast_p)
        return g->fast_a ? fused_for<Rounding::kNearestEven, true, true>(pp, pa)
                         : fused_for<Rounding::kNearestEven, true, false>(pp, pa);
      return g->fast_a ? fused_for<Rounding::kNearestEven, false, true>(pp, pa)
                       : fused_for<Rounding::kNearestEven, false, false>(pp, pa);
    case Rounding::kTiesAway:
      return fused_for<Rounding::kTiesAway, false, false>(pp, pa);
    case Rounding::kTowardZero:
      return fused_for<Rounding::kTowardZero, false, false>(pp, pa);
    case Rounding::kStochastic:
      return nullptr;
  }
  return nullptr;
}

// The lean kernel for this unit and these operands, or null. g: as fused_kernel() filled it.
FusedFn lean_kernel(const MadUnit& u, const UnitGrids& g, const float* A, const float* B, int64_t M,
                    int64_t N, int64_t K) {
#if TB_AVX512_KERNELS
  if (u.rounding != Rounding::kNearestEven || !kernel::avx512_cpu()) return nullptr;
  const bool pp = u.product == Format{}, pa = u.accumulator == Format{};
  if (pp) return pa ? lean_rows<LeanProduct::kPlain, LeanSum::kPlain> : nullptr;
  if (!g.fast_p || !exact_products(facts_of(A, M * K), facts_of(B, K * N))) return nullptr;
  if (pa) return lean_rows<LeanProduct::kGrid, LeanSum::kPlain>;
  if (g.ga.man_bits > 10 || !grid_within(g.gp, g.ga)) return nullptr;
  if (ieee_half(g.ga)) return lean_rows<LeanProduct::kGrid, LeanSum::kHalf>;
  return g.fast_a ? lean_rows<LeanProduct::kGrid, LeanSum::kGrid> : nullptr;
#else
  return nullptr;
#endif
}

std::string order_name(MadUnit::Order o) {
  switch (o) {
    case MadUnit::Order::kSequential:
      return "sequential";
    case MadUnit::Order::kLanes:
      return "lanes";
    case MadUnit::Order::kTree:
      return "tree";
  }
  return "?";
}

}  // namespace

std::string MadUnit::str() const {
  std::string s = "mad:mul=" + product.display_name() + ",acc=" + accumulator.display_name() +
                  ",width=" + std::to_string(width) + ",order=" + order_name(order);
  if (rounding != Rounding::kNearestEven) s += ",rounding=" + rounding_name(rounding);
  return s;
}

bool MadUnit::operator==(const MadUnit& o) const {
  return product == o.product && accumulator == o.accumulator && width == o.width &&
         order == o.order && rounding == o.rounding;
}

MadUnit parse_mad(const std::string& text) {
  const auto bad = [&](const std::string& why) -> void {
    throw UsageError("mad unit '" + text + "': " + why);
  };
  if (text.rfind("mad:", 0) != 0) bad("expected mad:mul=FORMAT,acc=FORMAT,width=N,order=ORDER");
  MadUnit u;
  u.product = parse_format("fp32");
  u.accumulator = parse_format("fp32");
  std::stringstream ss(text.substr(4));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) bad("'" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "mul" || k == "acc") {
      Format f = parse_format(v);
      if (f.kind == Format::Kind::kBlock) bad(k + "=" + v + ": a block format cannot hold a sum");
      (k == "mul" ? u.product : u.accumulator) = f;
    } else if (k == "width") {
      try {
        u.width = std::stoi(v);
      } catch (...) {
        u.width = 0;
      }
      if (u.width < 1 || u.width > 1024 || std::to_string(u.width) != v)
        bad("width=" + v + " (expected 1..1024)");
    } else if (k == "order") {
      if (v == "sequential")
        u.order = MadUnit::Order::kSequential;
      else if (v == "lanes")
        u.order = MadUnit::Order::kLanes;
      else if (v == "tree")
        u.order = MadUnit::Order::kTree;
      else
        bad("order=" + v + " (expected sequential|lanes|tree)");
    } else if (k == "rounding") {
      u.rounding = parse_rounding(v);
    } else {
      bad("unknown key '" + k + "' (keys: mul, acc, width, order, rounding)");
    }
  }
  return u;
}

std::string mad_kernel(const MadUnit& u, const float* A, const float* B, int64_t M, int64_t N,
                       int64_t K) {
  UnitGrids g;
  const FusedFn fused = fused_kernel(u, &g);
  if (!fused) return "scalar";
  return lean_kernel(u, g, A, B, M, N, K) ? "lean" : "fused";
}

void mad_matmul(const MadUnit& u, const float* A, const float* B, float* C, int64_t M, int64_t N,
                int64_t K, int threads) {
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  threads = int(std::max<int64_t>(1, std::min<int64_t>(threads, M)));
  UnitGrids g;
  const FusedFn fused = fused_kernel(u, &g);
  const FusedFn lean = fused ? lean_kernel(u, g, A, B, M, N, K) : nullptr;
  auto run = [&](int64_t b, int64_t e) {
    if (lean)
      lean(u, A, B, C, b, e, N, K, g);
    else if (fused)
      fused(u, A, B, C, b, e, N, K, g);
    else
      rows(u, A, B, C, b, e, N, K);
    // A NaN result is the positive quiet NaN. Its sign would otherwise be whichever NaN operand
    // the CPU passed on (IEEE 754 leaves that open: x86 passes the first, and makes negative
    // ones from Inf - Inf), and the kernels add in different orders: on one CPU the AVX-512
    // and portable builds gave NaNs of opposite signs (the test NumericsPortable).
    for (int64_t i = b * N; i < e * N; ++i)
      if (std::isnan(C[i])) C[i] = kernel::as_float(kernel::kQuietNan);
  };
  if (threads == 1) return run(0, M);
  std::vector<std::thread> pool;
  const int64_t per = (M + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t b = t * per, e = std::min(M, b + per);
    if (b >= e) break;
    pool.emplace_back([&, b, e] { run(b, e); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace tb::num
