// The number-format library on its own (no LibTorch): descriptors, the OCP FP8 value tables,
// boundaries and ties, every rounding mode against an independent reference, block formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "base/errors.h"
#include "numerics/format.h"
#include "numerics/mad.h"
#include "numerics/quantize.h"
#include "numerics/round_bits.h"

namespace {

using tb::num::FloatFormat;
using tb::num::Format;
using tb::num::Overflow;
using tb::num::parse_format;
using tb::num::quantize_one;
using tb::num::QuantOptions;
using tb::num::Rounding;
using tb::num::Special;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The obvious algorithm, in double: find the quantum of |x| in the format's grid, divide,
// round the quotient, multiply back, then check overflow. Slow and independent of the
// kernel's bit manipulation.
// Stochastic rounding rounds up where rnd / 2^32 < the fraction of a quantum above the lower
// neighbour, to 2^-32: rnd < floor(fraction * 2^32) (exact in double).
double reference(double x, const FloatFormat& f, Rounding r, uint32_t rnd = 0) {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  const double mx = f.max_finite();
  const double ovf = f.overflow == Overflow::kSaturate ? mx
                     : f.has_inf()                     ? INFINITY
                                                       : std::numeric_limits<double>::quiet_NaN();
  const double a = std::fabs(x);
  double v;
  if (std::isinf(a)) {
    v = ovf;
  } else if (a == 0) {
    v = 0;
  } else {
    int e;
    std::frexp(a, &e);
    --e;
    const int q =
        e >= f.emin() ? e - f.man_bits : (f.subnormals ? f.emin() - f.man_bits : f.emin());
    const double t = std::ldexp(a, -q), fl = std::floor(t), d = t - fl;
    double k = fl;
    if (r == Rounding::kNearestEven)
      k = (d > 0.5 || (d == 0.5 && std::fmod(fl, 2) == 1)) ? fl + 1 : fl;
    if (r == Rounding::kTiesAway) k = d >= 0.5 ? fl + 1 : fl;
    if (r == Rounding::kStochastic) k = double(rnd) < std::floor(std::ldexp(d, 32)) ? fl + 1 : fl;
    v = std::ldexp(k, q);
    if (v > mx) v = ovf;
  }
  if (v == 0 && f.special == Special::kFnuz) return 0.0;
  return std::copysign(v, x);
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

const char* kFloatPresets[] = {"fp32",     "bf16", "fp16", "tf32",     "fp8_152",
                               "fp16_169", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz",
                               "e3m4",     "e2m3", "e3m2", "e2m1"};

TEST(NumericsFormat, PresetsAndDescriptorsRoundTrip) {
  for (const auto& p : tb::num::format_presets()) {
    const Format f = parse_format(p.name);
    EXPECT_EQ(parse_format(f.str()), f) << p.name << " -> " << f.str();
    EXPECT_EQ(parse_format(f.str()).str(), f.str());
  }
  for (const char* text :
       {"e5m2", "e3m3", "fp:e=4,m=3,sub=on,special=fn,overflow=sat", "fp:e=6,m=9,bias=20,sub=off",
        "fixed:w=16,f=8", "fixed:w=8,f=0,signed=off,sat=off", "bfp:block=8,m=4,e=6", "mx:elem=e2m1",
        "mx:elem=int8,block=16"}) {
    const Format f = parse_format(text);
    EXPECT_EQ(parse_format(f.str()), f) << text << " -> " << f.str();
  }
  EXPECT_EQ(parse_format("fp:e=4,m=3,sub=on,special=fn,overflow=sat").str(),
            "fp:e=4,m=3,bias=7,sub=on,special=fn,overflow=sat");
  EXPECT_EQ(parse_format("fixed:w=16,f=8").str(), "fixed:w=16,f=8,signed=on,sat=on");
  // A preset and its spelled-out descriptor are the same format.
  EXPECT_EQ(parse_format("e4m3"), parse_format("fp:e=4,m=3,special=fn"));
  EXPECT_EQ(parse_format("bf16"), parse_format("fp:e=8,m=7"));
  EXPECT_EQ(parse_format("fp16_169"), parse_format("e6m9"));
}

TEST(NumericsFormat, BadDescriptorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"fp9", "unknown"},
      {"fp:e=4", "needs e= and m="},
      {"fp:e=4,m=x", "m=x"},
      {"fp:e=9,m=3", "e=9"},
      {"fp:e=4,m=3,special=odd", "special=odd"},
      {"fp:e=4,m=3,zz=1", "unknown key 'zz'"},
      {"fp:e=8,m=3,special=fn", "float32's range"},
      {"fp:e=8,m=7,bias=200", "float32's subnormals"},
      {"fp:e=3,m=2,special=none,overflow=nan", "overflow=sat"},
      {"fp:e=4,m=3,special=fn,overflow=inf", "overflow=inf"},
      {"fixed:w=32,f=8", "w=32"},
      {"mx:elem=e9m9", "elem=e9m9"},
      {"bfp:block=0", "block=0"},
      {"nope:x=1", "unknown kind 'nope'"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      parse_format(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const tb::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
  EXPECT_THROW(tb::num::parse_rounding("up"), tb::UsageError);
}

// OCP 8-bit Floating Point Specification (OFP8) rev 1.0, Table 1, written down as constants.
TEST(NumericsFormat, OcpE4M3Table) {
  const Format f = parse_format("e4m3");
  EXPECT_EQ(f.fp.bias, 7);
  EXPECT_EQ(f.fp.max_finite(), 448.0);                   // S.1111.110
  EXPECT_EQ(f.fp.min_normal(), std::ldexp(1.0, -6));     // S.0001.000
  EXPECT_EQ(f.fp.min_subnormal(), std::ldexp(1.0, -9));  // S.0000.001
  EXPECT_FALSE(f.fp.has_inf());
  EXPECT_EQ(tb::num::encode(f, 448.0f), 0x7E);
  EXPECT_EQ(tb::num::encode(f, -448.0f), 0xFE);
  EXPECT_EQ(tb::num::encode(f, std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(tb::num::encode(f, std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(tb::num::encode(f, 0.875f * std::ldexp(1.0f, -6)), 0x07);  // max subnormal
  EXPECT_EQ(tb::num::encode(f, NAN), 0x7F);                            // S.1111.111
  EXPECT_EQ(tb::num::encode(f, -0.0f), 0x80);
  // Every code: the spec's formula, and quantizing the value gives it back.
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const float v = tb::num::decode(f.fp, c);
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    const double spec =
        (s ? -1 : 1) * (e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, int(e) - 7));
    EXPECT_EQ(double(v), spec) << c;
    EXPECT_TRUE(same(quantize_one(f, v), v)) << c;
    EXPECT_EQ(tb::num::encode(f, v), int64_t(c)) << c;
  }
}

TEST(NumericsFormat, OcpE5M2Table) {
  const Format f = parse_format("e5m2");
  EXPECT_EQ(f.fp.bias, 15);
  EXPECT_EQ(f.fp.max_finite(), 57344.0);                  // S.11110.11
  EXPECT_EQ(f.fp.min_normal(), std::ldexp(1.0, -14));     // S.00001.00
  EXPECT_EQ(f.fp.min_subnormal(), std::ldexp(1.0, -16));  // S.00000.01
  EXPECT_EQ(tb::num::encode(f, 57344.0f), 0x7B);
  EXPECT_EQ(tb::num::encode(f, INFINITY), 0x7C);  // S.11111.00
  EXPECT_EQ(tb::num::encode(f, -INFINITY), 0xFC);
  EXPECT_EQ(tb::num::encode(f, 0.75f * std::ldexp(1.0f, -14)), 0x03);  // max subnormal
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    const float v = tb::num::decode(f.fp, c);
    if (e == 31) {
      EXPECT_TRUE(m ? std::isnan(v) : std::isinf(v)) << c;  // NaN: S.11111.{01,10,11}
      continue;
    }
    const double spec =
        (s ? -1 : 1) * (e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1 + m / 4.0, int(e) - 15));
    EXPECT_EQ(double(v), spec) << c;
    EXPECT_TRUE(same(quantize_one(f, v), v)) << c;
    EXPECT_EQ(tb::num::encode(f, v), int64_t(c)) << c;
  }
}

TEST(NumericsFormat, OverflowTiesAndSpecialValues) {
  const Format e4 = parse_format("e4m3"), e5 = parse_format("e5m2");
  const Format e4sat = parse_format("fp:e=4,m=3,special=fn,overflow=sat");
  // E4M3: 464 is the tie between 448 (mantissa 110, even) and 480 (beyond max): 448.
  EXPECT_EQ(quantize_one(e4, 464.0f), 448.0f);
  EXPECT_TRUE(std::isnan(quantize_one(e4, 464.001f)));
  EXPECT_TRUE(std::isnan(quantize_one(e4, INFINITY)));
  EXPECT_EQ(quantize_one(e4sat, 1e6f), 448.0f);
  EXPECT_EQ(quantize_one(e4sat, -INFINITY), -448.0f);
  EXPECT_TRUE(std::isnan(quantize_one(e4sat, NAN)));
  // E5M2: 61440 is the tie between 57344 (odd) and 65536: to even, which overflows to Inf.
  EXPECT_EQ(quantize_one(e5, 61439.996f), 57344.0f);
  EXPECT_EQ(quantize_one(e5, 61440.0f), INFINITY);
  EXPECT_EQ(quantize_one(e5, -61440.0f), -INFINITY);
  EXPECT_EQ(quantize_one(e5, 61440.0f, Rounding::kTowardZero), 57344.0f);
  // Half the smallest subnormal: ties to even (0); ties away: the subnormal.
  EXPECT_EQ(quantize_one(e4, std::ldexp(1.0f, -10)), 0.0f);
  EXPECT_EQ(quantize_one(e4, std::ldexp(1.0f, -10), Rounding::kTiesAway), std::ldexp(1.0f, -9));
  EXPECT_EQ(quantize_one(e4, std::nextafter(std::ldexp(1.0f, -10), 1.0f)), std::ldexp(1.0f, -9));
  EXPECT_EQ(bits(quantize_one(e4, -1e-30f)), 0x80000000u);  // -0 kept
  // fnuz: no negative zero, NaN is 0x80.
  const Format fnuz = parse_format("e4m3fnuz");
  EXPECT_EQ(fnuz.fp.max_finite(), 240.0);
  EXPECT_EQ(bits(quantize_one(fnuz, -1e-30f)), 0u);
  EXPECT_EQ(tb::num::encode(fnuz, NAN), 0x80);
  EXPECT_TRUE(std::isnan(tb::num::decode(fnuz.fp, 0x80)));
  EXPECT_EQ(parse_format("e5m2fnuz").fp.max_finite(), 57344.0);
  // MX element formats: every pattern finite, saturating.
  EXPECT_EQ(parse_format("e2m1").fp.max_finite(), 6.0);
  EXPECT_EQ(parse_format("e2m3").fp.max_finite(), 7.5);
  EXPECT_EQ(parse_format("e3m2").fp.max_finite(), 28.0);
  EXPECT_EQ(parse_format("e3m4").fp.max_finite(), 30.0);
  EXPECT_EQ(quantize_one(parse_format("e2m1"), 100.0f), 6.0f);
  EXPECT_EQ(quantize_one(parse_format("e2m1"), 0.25f), 0.0f);  // tie: 0 (even) vs 0.5
  EXPECT_EQ(quantize_one(parse_format("e2m1"), 2.5f), 2.0f);   // tie: 2 (even) vs 3
  EXPECT_EQ(quantize_one(parse_format("e2m1"), 5.0f), 4.0f);   // tie: 4 (even) vs 6
  // Subnormals off: the grid below the smallest normal is {0, min normal}.
  const Format nosub = parse_format("fp:e=4,m=3,special=fn,sub=off");
  EXPECT_EQ(quantize_one(nosub, std::ldexp(1.0f, -7)), 0.0f);  // tie, to even
  EXPECT_EQ(quantize_one(nosub, std::ldexp(1.5f, -7)), std::ldexp(1.0f, -6));
  EXPECT_EQ(quantize_one(nosub, std::ldexp(1.0f, -9)), 0.0f);
}

// Every preset and some custom formats, every deterministic mode, against the reference: all
// float32 values near every binade edge, every tie and neighbour, plus random patterns.
TEST(NumericsFormat, MatchesTheReferenceEverywhereThatMatters) {
  std::vector<std::string> names(std::begin(kFloatPresets), std::end(kFloatPresets));
  for (const char* c :
       {"fp:e=4,m=3,special=fn,overflow=sat", "fp:e=5,m=2,sub=off", "fp:e=8,m=3,bias=140",
        "fp:e=6,m=5,bias=20,special=fnuz", "fp:e=3,m=0,special=fnuz", "fp:e=8,m=23,sub=off",
        "fp:e=8,m=10,bias=128,special=none,overflow=sat"})
    names.push_back(c);
  std::vector<float> xs;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) xs.push_back(from_bits(rng()));
  for (const auto& name : names) {
    const Format f = parse_format(name);
    std::vector<float> probes = xs;
    // Each representable value of the format's range, the midpoints and their neighbours.
    for (int e = std::max(f.fp.emin() - f.fp.man_bits - 2, -149);
         e <= std::min(f.fp.emax() + 2, 127); ++e) {
      for (int m = 0; m < (1 << std::min(f.fp.man_bits + 1, 6)); ++m) {
        const double base = std::ldexp(1.0 + m / double(1 << std::min(f.fp.man_bits + 1, 6)), e);
        for (double v : {base, base * (1 + std::ldexp(1.0, -f.fp.man_bits - 1))}) {
          const float fv = float(v);
          for (float p : {fv, std::nextafter(fv, 0.0f), std::nextafter(fv, INFINITY)})
            for (float sgn : {1.0f, -1.0f}) probes.push_back(sgn * p);
        }
      }
    }
    for (float p : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()})
      probes.push_back(p);
    for (Rounding r : {Rounding::kNearestEven, Rounding::kTiesAway, Rounding::kTowardZero,
                       Rounding::kStochastic}) {
      QuantOptions o;
      o.rounding = r;
      o.seed = 5;
      const auto got = tb::num::quantize(f, probes, o);
      int bad = 0;
      for (size_t i = 0; i < probes.size() && bad < 5; ++i) {
        const float want =
            float(reference(double(probes[i]), f.fp, r, tb::num::random_bits(o.seed, i)));
        if (!same(got[i], want)) {
          ++bad;
          ADD_FAILURE() << name << " " << tb::num::rounding_name(r) << " x=" << probes[i] << " (0x"
                        << std::hex << bits(probes[i]) << std::dec << ") got " << got[i] << " want "
                        << want;
        }
      }
    }
  }
}

// NVFP4's stochastic rounding takes a kernel written for E2M1's grid alone: the reference's
// bits and the general kernel's for every binade E2M1 rounds in, the random words on both sides
// of each input's threshold, and specials; the general kernel again with flushed denormals, as
// trainbench runs.
TEST(NumericsFormat, E2m1StochasticKernelMatchesTheReference) {
  FloatFormat e2m1 = parse_format("e2m1").fp;
  e2m1.overflow = Overflow::kSaturate;  // NVFP4's element cast saturates
  const auto grid = tb::num::kernel::float_grid(e2m1);
  tb::num::kernel::FastGrid fast{};
  ASSERT_TRUE(tb::num::kernel::fast_grid(grid, &fast));
  std::vector<uint32_t> xs;
  std::mt19937 rng(17);
  for (int i = 0; i < 100000; ++i) xs.push_back(rng());
  for (uint32_t b = 0x3E000000u; b <= 0x41800000u; b += 97) xs.push_back(b);  // 0.125 to 16
  for (uint32_t m = 1; m < (1u << 23); m = m * 3 + 1) xs.push_back(m);        // subnormals
  for (float v : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 3.5f, 5.0f, 6.0f, 7.0f, 8.0f, INFINITY,
                  NAN, std::numeric_limits<float>::max()})
    xs.push_back(bits(v));
  const size_t n = xs.size();
  for (size_t i = 0; i < n; ++i) xs.push_back(xs[i] ^ 0x80000000u);
  int bad = 0;
  for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
    const double a = std::fabs(double(from_bits(xs[i])));
    // The fraction of a quantum above the lower neighbour, as 32 bits: rnd below it rounds up.
    uint32_t edge = 0;
    if (std::isfinite(a) && a > 0 && a < 8) {
      const int q = a < 1 ? -1 : std::ilogb(a) - 1;
      const double t = std::ldexp(a, -q);
      edge = uint32_t(std::ldexp(t - std::floor(t), 32));
    }
    for (uint32_t rnd : {0u, ~0u, tb::num::kernel::hash32(uint32_t(i)), edge, edge - 1u}) {
      const uint32_t got = tb::num::kernel::round_stochastic_e2m1(xs[i], fast, rnd);
      const float want =
          float(reference(double(from_bits(xs[i])), e2m1, Rounding::kStochastic, rnd));
      const uint32_t general = tb::num::kernel::round_stochastic_fast(xs[i], fast, rnd);
      if (!same(from_bits(got), want) || got != general) {
        ++bad;
        ADD_FAILURE() << "x=0x" << std::hex << xs[i] << " rnd=0x" << rnd << ": 0x" << got
                      << ", reference 0x" << bits(want) << ", general kernel 0x" << general;
      }
    }
  }
#if defined(__SSE2__)
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
    const uint32_t rnd = tb::num::kernel::hash32(uint32_t(i) + 7u);
    bad += tb::num::kernel::round_stochastic_e2m1(xs[i], fast, rnd) !=
           tb::num::kernel::round_stochastic_fast(xs[i], fast, rnd);
  }
  _mm_setcsr(saved);
  EXPECT_EQ(bad, 0) << "with flushed denormals";
#endif
}

TEST(NumericsFormat, EveryCodeOfSmallFormatsDecodesEncodesAndIsAFixedPoint) {
  for (const char* name : kFloatPresets) {
    const Format f = parse_format(name);
    if (f.fp.bits() > 16) continue;
    for (uint32_t c = 0; c < (1u << f.fp.bits()); ++c) {
      const float v = tb::num::decode(f.fp, c);
      EXPECT_TRUE(same(quantize_one(f, v), v)) << name << " code " << c;
      if (!std::isnan(v) && !(v == 0 && f.fp.special == Special::kFnuz && c != 0))
        EXPECT_EQ(tb::num::encode(f, v), int64_t(c)) << name << " code " << c;
    }
  }
}

TEST(NumericsFormat, StochasticRoundingIsUnbiasedAndReproducible) {
  const Format f = parse_format("bf16");
  const float x = 1.0f + 0.3f * std::ldexp(1.0f, -7);  // 0.3 of a quantum above 1
  std::vector<float> in(200000, x), a(in.size()), b(in.size()), c(in.size());
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  o.seed = 42;
  tb::num::quantize(f, in.data(), a.data(), in.size(), o);
  o.threads = 4;
  tb::num::quantize(f, in.data(), b.data(), in.size(), o);
  EXPECT_EQ(a, b);  // same seed, any threads: same result
  o.seed = 43;
  tb::num::quantize(f, in.data(), c.data(), in.size(), o);
  EXPECT_NE(a, c);
  size_t ups = 0;
  for (float v : a) {
    ASSERT_TRUE(v == 1.0f || v == 1.0f + std::ldexp(1.0f, -7)) << v;
    ups += v != 1.0f;
  }
  EXPECT_NEAR(double(ups) / a.size(), 0.3, 0.005);
  // Far below the smallest quantum (the s > 24 path): probability 2^-10.
  const Format e4 = parse_format("e4m3");
  std::vector<float> tiny(1 << 20, std::ldexp(1.0f, -19)), t(tiny.size());
  o.seed = 1;
  tb::num::quantize(e4, tiny.data(), t.data(), tiny.size(), o);
  size_t n = 0;
  for (float v : t) n += v != 0;
  EXPECT_NEAR(double(n) / t.size(), std::ldexp(1.0, -10),
              3 * std::sqrt(std::ldexp(1.0, -10) / t.size()));
  // Fixed point too.
  const Format fx = parse_format("fixed:w=8,f=2");
  std::vector<float> fin(100000, 0.1f), fout(fin.size());
  tb::num::quantize(fx, fin.data(), fout.data(), fin.size(), o);
  double mean = 0;
  for (float v : fout) mean += v;
  EXPECT_NEAR(mean / fout.size(), 0.1, 0.003);
}

TEST(NumericsFormat, FixedPoint) {
  const Format f = parse_format("fixed:w=8,f=4");  // k / 16, k in [-128, 127]
  EXPECT_EQ(f.fx.max_value(), 127.0 / 16);
  EXPECT_EQ(f.fx.min_value(), -8.0);
  EXPECT_EQ(quantize_one(f, 1.03125f), 1.0f);    // tie 1 + 1/32: to even k=16
  EXPECT_EQ(quantize_one(f, 1.09375f), 1.125f);  // tie: k=17.5 -> 18
  EXPECT_EQ(quantize_one(f, 1.03125f, Rounding::kTiesAway), 1.0625f);
  EXPECT_EQ(quantize_one(f, -1.03125f, Rounding::kTiesAway), -1.0625f);
  EXPECT_EQ(quantize_one(f, -1.06f, Rounding::kTowardZero), -1.0f);
  EXPECT_EQ(quantize_one(f, 100.0f), 127.0f / 16);
  EXPECT_EQ(quantize_one(f, -100.0f), -8.0f);
  EXPECT_EQ(quantize_one(f, INFINITY), 127.0f / 16);
  EXPECT_TRUE(std::isnan(quantize_one(f, NAN)));
  const Format wrap = parse_format("fixed:w=8,f=4,sat=off");
  EXPECT_EQ(quantize_one(wrap, 8.0f), -8.0f);        // k=128 wraps to -128
  EXPECT_EQ(quantize_one(wrap, 8.0625f), -7.9375f);  // 129 -> -127
  EXPECT_EQ(quantize_one(wrap, -8.0625f), 7.9375f);  // -129 -> 127
  EXPECT_EQ(tb::num::encode(f, -1.0f), 0xF0);
  EXPECT_EQ(tb::num::decode(f.fx, 0xF0), -1.0f);
  const Format u = parse_format("fixed:w=8,f=0,signed=off");
  EXPECT_EQ(quantize_one(u, -3.0f), 0.0f);
  EXPECT_EQ(quantize_one(u, 300.0f), 255.0f);
}

// Fixed point, saturating and with two's-complement wrap-around (the saturating kernels for
// runs whose x * 2^frac lies in [kmin, kmax], a wrap kernel for the rest, fmod past 2^52),
// against a reference written here: every mode, values at and past both ends of the range,
// NaN and Inf, unsigned, negative and large frac (the kernels' float32 and double forms), out
// of place and in place, on one thread and streamed on two.
TEST(NumericsFormat, FixedPointMatchesItsDefinitionInEveryMode) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const char* name :
       {"fixed:w=8,f=4,sat=off", "fixed:w=8,f=0,signed=off,sat=off", "fixed:w=12,f=-2,sat=off",
        "fixed:w=8,f=4", "fixed:w=16,f=-3", "fixed:w=24,f=20", "fixed:w=8,f=0,signed=off"}) {
    const Format f = parse_format(name);
    const double sc = std::ldexp(1.0, f.fx.frac_bits);
    const double lo = f.fx.min_value() * sc, hi = f.fx.max_value() * sc, span = hi - lo + 1;
    std::vector<float> x;
    // Quarter steps (ties too) around both ends of the range and around 0.
    for (const double c : {lo, 0.0, hi})
      for (double k = c - 3; k <= c + 3; k += 0.25) x.push_back(float(k / sc));
    // Runs within the range (the saturating kernels' part of wrap-around), then beyond it.
    for (int i = 0; i < 1000; ++i) x.push_back(float((lo + (u(rng) + 1) / 2 * (hi - lo)) / sc));
    for (int i = 0; i < 3000; ++i) x.push_back(float(u(rng) * 3 * span / sc));
    // The specials among values that wrap (the wrap kernel's selects), and past 2^52 after
    // scaling, 1000 values on (the remainder through fmod, in a run of its own).
    x[2000] = NAN;
    x[2600] = INFINITY;
    x[3200] = -INFINITY;
    x[3700] = -0.0f;
    for (const float big : {1e20f, -3e38f, 0x1p60f, -0x1p53f, 3.4e38f}) x.push_back(big);
    for (size_t i = 0; x.size() < 140000; ++i) x.push_back(x[i]);  // two threads' worth
    for (Rounding r : {Rounding::kNearestEven, Rounding::kTiesAway, Rounding::kTowardZero,
                       Rounding::kStochastic}) {
      QuantOptions o;
      o.rounding = r;
      o.seed = 11;
      o.offset = 5;
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i])) {
          want[i] = NAN;
          continue;
        }
        if (std::isinf(x[i])) {
          want[i] = float((x[i] > 0 ? hi : lo) / sc);
          continue;
        }
        const double t = double(x[i]) * sc;
        double k =
            r == Rounding::kNearestEven ? std::nearbyint(t)
            : r == Rounding::kTiesAway  ? std::round(t)
            : r == Rounding::kTowardZero
                ? std::trunc(t)
                : std::floor(t) +
                      double((long double)tb::num::random_bits(o.seed, o.offset + i) * 0x1p-32L <
                             (long double)t - std::floor(t));
        if (f.fx.saturate)
          k = std::min(std::max(k, lo), hi);
        else if (k < lo || k > hi)
          k = std::fmod(std::fmod(k - lo, span) + span, span) + lo;
        want[i] = float((k + 0.0) / sc);
      }
      const auto same_bits = [&](const std::vector<float>& y, const char* how) {
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i)
          bad += !(std::isnan(want[i]) ? std::isnan(y[i])
                                       : std::memcmp(&want[i], &y[i], sizeof(float)) == 0);
        EXPECT_EQ(bad, 0) << name << " " << tb::num::rounding_name(r) << " " << how;
      };
      same_bits(tb::num::quantize(f, x, o), "one thread");
      std::vector<float> in_place = x;
      tb::num::quantize(f, in_place.data(), in_place.data(), in_place.size(), o);
      same_bits(in_place, "in place");
      QuantOptions st = o;
      st.threads = 2;
      st.stream_above = 1000;
      same_bits(tb::num::quantize(f, x, st), "streamed, two threads");
    }
  }
}

TEST(NumericsFormat, MxBlocksShareAnE8M0Scale) {
  const Format mx = parse_format("mxfp8_e4m3");
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.01f * (i + 1) * (i % 2 ? -1 : 1);
  x[31] = 3.0f;  // block 0's max: floor(log2 3) = 1, scale 2^(1 - 8)
  QuantOptions o;
  o.row = 64;
  const auto y = tb::num::quantize(mx, x, o);
  const Format e4 = parse_format("fp:e=4,m=3,special=fn,overflow=sat");
  EXPECT_EQ(tb::num::block_exponent(mx.blk, x.data(), 32), 127 + 1 - 8);
  for (int i = 0; i < 64; ++i) {
    const int s = i < 32 ? 1 - 8 : tb::num::block_exponent(mx.blk, x.data() + 32, 32) - 127;
    // Scaling by a power of two is exact here, so the element is quantize(x / X) * X.
    const float want = std::ldexp(quantize_one(e4, std::ldexp(x[i], -s)), s);
    EXPECT_EQ(y[i], want) << i;
  }
  // A NaN or Inf anywhere makes the block's scale NaN; the other block is untouched.
  x[3] = NAN;
  const auto z = tb::num::quantize(mx, x, o);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(z[i])) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(z[i], y[i]) << i;
  // Blocks restart at each row: rows of 40 give blocks [0,32) [32,40) [40,72) ...
  std::vector<float> r(80, 1.0f);
  r[35] = 64.0f;
  o.row = 40;
  const auto q = tb::num::quantize(parse_format("mxfp4_e2m1"), r, o);
  EXPECT_EQ(q[0], 1.0f);   // block 0: scale from 1.0
  EXPECT_EQ(q[33], 0.0f);  // block [32,40): scale 2^(6-2), 1.0/16 -> 0 in e2m1
  EXPECT_EQ(q[35], 64.0f);
  EXPECT_EQ(q[41], 1.0f);  // next row's block
  // MXINT8: k * 2^-6 * X.
  const Format mi = parse_format("mxint8");
  std::vector<float> v = {1.0f, 0.5f, 0.01f, -1.5f};
  const auto w = tb::num::quantize(mi, v);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(w[3], -1.5f);
  EXPECT_EQ(w[2], std::ldexp(std::nearbyint(0.01 * 64), -6));
}

TEST(NumericsFormat, BlockFloatingPoint) {
  const Format f = parse_format("bfp:block=4,m=3");  // sign + 3 bits, shared exponent
  const std::vector<float> x = {1.0f, 0.3f, -0.06f, 1.9f, 0.1f, 0.0f, 0.0f, 0.0f};
  const auto y = tb::num::quantize(f, x);
  // Block 0: max exponent 0, quantum 2^(0 - 3 + 1) = 0.25; 1.9 rounds to 2.0 > 1.75: saturates.
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.25f);
  EXPECT_EQ(y[2], -0.0f);
  EXPECT_EQ(y[3], 1.75f);
  // Block 1: max 0.1 (exponent -4), quantum 2^-6.
  EXPECT_EQ(y[4], float(std::ldexp(std::nearbyint(0.1f * 64), -6)));
}

// Every element of many blocks against the definition: the block's shared exponent (from
// block_exponent), then the element rounded on its grid by the double-precision reference.
// MX: element format (saturating) at scale 2^(E - 127); BFP: m-bit magnitudes times
// 2^(e - m + 1), saturating. Both modes, blocks of every magnitude.
// Element j of x, in the block of b elements starting at k * b, rounded as the block format's
// definition says, in double: the block's shared exponent, then the element's grid.
double block_reference(const Format& f, const std::vector<float>& x, size_t k, size_t j, Rounding r,
                       uint32_t rnd) {
  const size_t b = size_t(f.blk.block);
  const int se = tb::num::block_exponent(f.blk, x.data() + k * b, b);
  if (f.blk.kind == tb::num::BlockFormat::Kind::kMx && f.blk.element == "int8") {
    // k * 2^(s - 6), k in [-128, 127], saturating (OCP MX v1.0's INT8: 1.6 two's complement)
    const int s = se - 127;
    if (se == 255) return std::numeric_limits<double>::quiet_NaN();
    const double t = std::ldexp(double(x[j]), 6 - s), fl = std::floor(t), d = t - fl;
    double k = r == Rounding::kNearestEven ? std::nearbyint(t)
               : r == Rounding::kTiesAway  ? std::round(t)
               : r == Rounding::kTowardZero
                   ? std::trunc(t)
                   : fl + double((long double)rnd * 0x1p-32L < (long double)t - fl);
    k = std::min(std::max(k, -128.0), 127.0);
    return std::ldexp(k, s - 6) + 0.0;  // a negative value rounding to 0 gives +0
  }
  if (f.blk.kind == tb::num::BlockFormat::Kind::kMx) {
    FloatFormat el = parse_format(f.blk.element).fp;
    el.overflow = Overflow::kSaturate;
    const int s = se - 127;
    // Grids saturate at the largest float32 at or below max * 2^s (E8M0's 2^127 times E2M1's 6
    // is above float32's range).
    const double v = std::ldexp(reference(std::ldexp(double(x[j]), -s), el, r, rnd), s);
    return std::fabs(v) > std::numeric_limits<float>::max()
               ? std::copysign(double(std::numeric_limits<float>::max()), v)
               : v;
  }
  const double quantum = std::ldexp(1.0, se - f.blk.man_bits + 1);
  const double t = std::fabs(double(x[j])) / quantum, fl = std::floor(t), d = t - fl;
  double kk = fl;
  if (r == Rounding::kNearestEven)
    kk = (d > 0.5 || (d == 0.5 && std::fmod(fl, 2) == 1)) ? fl + 1 : fl;
  else if (r == Rounding::kTiesAway)
    kk = d >= 0.5 ? fl + 1 : fl;
  else if (r == Rounding::kStochastic)
    kk = double(rnd) < std::floor(std::ldexp(d, 32)) ? fl + 1 : fl;
  kk = std::min(kk, std::ldexp(1.0, f.blk.man_bits) - 1);
  return std::copysign(kk * quantum, double(x[j]));
}

TEST(NumericsFormat, BlocksMatchTheReferenceElementByElement) {
  std::mt19937 rng(21);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> ex(-40, 40);
  for (const char* name : {"mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "bfp8", "bfp:block=4,m=3",
                           "mxint8", "mx:elem=int8,block=16"}) {
    const Format f = parse_format(name);
    const size_t b = size_t(f.blk.block);
    std::vector<float> x(b * 400);
    for (size_t k = 0; k < x.size() / b; ++k) {
      const int e = ex(rng);
      for (size_t i = 0; i < b; ++i) x[k * b + i] = float(std::ldexp(nd(rng), e));
    }
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTiesAway,
                       Rounding::kTowardZero}) {
      QuantOptions o;
      o.rounding = r;
      o.seed = 8;
      const auto y = tb::num::quantize(f, x, o);
      int bad = 0;
      for (size_t k = 0; k < x.size() / b && bad < 5; ++k)
        for (size_t i = 0; i < b; ++i) {
          const size_t j = k * b + i;
          const double want = block_reference(f, x, k, j, r, tb::num::random_bits(o.seed, j));
          if (!same(y[j], float(want))) {
            ++bad;
            ADD_FAILURE() << name << " " << tb::num::rounding_name(r) << " block " << k
                          << " x=" << x[j] << " got " << y[j] << " want " << want;
          }
        }
    }
  }
}

// Stochastic, ties-away and toward-zero rounding of MX and BFP blocks (the AVX-512 rows scale
// a block to its element grid and back) at the ends of the exponent range: blocks of subnormals,
// blocks whose largest element is normal and whose others are subnormal or flush to zero when
// scaled, blocks where the shared exponent is clamped, with and without FTZ/DAZ (trainbench runs
// with both set), against the definition in double, bit for bit.
// block_exponent() (the CLI's and the tests' reference) gives an rceil block's exponent as the
// quantizer takes it, with FTZ/DAZ set too: amax / max is subnormal below amax ~ 2^-117.
TEST(NumericsFormat, RceilExponentIgnoresFlushToZero) {
  const Format f = parse_format("mx:elem=e4m3,block=32,scale=rceil");
  for (const int e : {-125, -121, -118, -117, -110, 0}) {
    std::vector<float> x(32, 0.0f);
    x[3] = std::ldexp(1.5f, e);
    const int plain = tb::num::block_exponent(f.blk, x.data(), x.size());
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
    const int flushed = tb::num::block_exponent(f.blk, x.data(), x.size());
    const bool kept = (_mm_getcsr() & 0x8040) == 0x8040;
    _mm_setcsr(saved);
    EXPECT_EQ(flushed, plain) << "amax 1.5 * 2^" << e;
    EXPECT_TRUE(kept) << "the caller's MXCSR is restored";
  }
}

TEST(NumericsFormat, DirectedAndStochasticBlocksMatchTheReferenceAtTheEndsOfTheRange) {
  std::mt19937 rng(33);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> lead(-149, 127), spread(0, 40);
  for (const char* name :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp4_e2m1", "mx:elem=e4m3,block=32,scale=rceil",
        "mx:elem=e5m2,block=32,scale=ceil", "mx:elem=e2m1,block=32,scale=even", "bfp8"}) {
    const Format f = parse_format(name);
    const size_t b = size_t(f.blk.block);
    std::vector<float> x(b * 1200);
    for (size_t k = 0; k < x.size() / b; ++k) {
      // A leading exponent anywhere from float32's subnormals to its largest, the rest of the
      // block up to 40 binades below it; some blocks all zeros but one subnormal.
      const int e = lead(rng);
      for (size_t i = 0; i < b; ++i) {
        const double v = std::ldexp(std::fabs(nd(rng)) + 0.5, e - (i ? spread(rng) : 0));
        x[k * b + i] = float(std::min(v, 3.0e38) * (rng() % 2 ? 1 : -1));
      }
      if (k % 97 == 0)
        for (size_t i = 1; i < b; ++i) x[k * b + i] = 0;
    }
    for (const bool ftz : {false, true})
      for (Rounding r : {Rounding::kStochastic, Rounding::kTiesAway, Rounding::kTowardZero}) {
        QuantOptions o;
        o.rounding = r;
        o.seed = 12;
        const unsigned saved = _mm_getcsr();
        if (ftz) _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
        const auto y = tb::num::quantize(f, x, o);
        _mm_setcsr(saved);
        int bad = 0;
        for (size_t k = 0; k < x.size() / b && bad < 5; ++k)
          for (size_t i = 0; i < b; ++i) {
            const size_t j = k * b + i;
            const double want =
                block_reference(f, x, k, j, o.rounding, tb::num::random_bits(12, j));
            if (!same(y[j], float(want))) {
              ++bad;
              ADD_FAILURE() << name << (ftz ? " FTZ/DAZ " : " ") << tb::num::rounding_name(r)
                            << " block " << k << " x=" << x[j] << " got " << y[j] << " want "
                            << want;
            }
          }
      }
  }
}

// Whole blocks are taken 16 at a time when a row holds that many: the same results as each
// block on its own, blocks holding Inf or NaN (the NaN scale of MX) included, in rows that end
// with a partial block, for both rounding modes.
TEST(NumericsFormat, SixteenBlocksAtOnceRoundAsEachBlockAlone) {
  std::mt19937 rng(5);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> ex(-30, 30);
  std::vector<float> x(3000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(std::ldexp(nd(rng), ex(rng) / 4 + int(i / 32 % 9)));
  x[5] = std::numeric_limits<float>::infinity();
  x[300] = std::numeric_limits<float>::quiet_NaN();
  x[1610] = -std::numeric_limits<float>::infinity();
  // Rows of 1000, 784 and 40 end in a short block; rows of 20, 10 and 7 are shorter than a
  // block (one block each, 16 rows at a time; 3000 = 428 * 7 + 4 ends in a shorter row); rows
  // of 256 are whole blocks, which the kernels take as one long row (the last row here is short:
  // 3000 = 11 * 256 + 184).
  for (const size_t row :
       {size_t(1000), size_t(784), size_t(40), size_t(20), size_t(10), size_t(7), size_t(256)})
    for (const char* name : {"mxfp8_e4m3", "mx:elem=e4m3,block=32,scale=rceil", "bfp8", "mxint8",
                             "mx:elem=int8,block=16"})
      for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTiesAway,
                         Rounding::kTowardZero}) {
        const Format f = parse_format(name);
        const size_t b = size_t(f.blk.block);
        QuantOptions o;
        o.rounding = r;
        o.seed = 4;
        o.row = row;
        const auto whole = tb::num::quantize(f, x, o);
        std::vector<float> alone(x.size());
        for (size_t r0 = 0; r0 < x.size(); r0 += row)
          for (size_t b0 = 0, rn = std::min(row, x.size() - r0); b0 < rn; b0 += b) {
            QuantOptions one = o;
            one.offset = r0 + b0;
            one.row = 0;
            const size_t len = std::min(b, rn - b0);
            tb::num::quantize(f, x.data() + r0 + b0, alone.data() + r0 + b0, len, one);
          }
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += !same(whole[i], alone[i]);
        EXPECT_EQ(bad, 0) << name << " " << tb::num::rounding_name(r) << " row " << row;
      }
}

// The proof behind leaves_unchanged's MX rule (emulation/torch_quant.h): with the shared
// exponent floor(log2(amax)) - emax, a block's largest element lands in [2^emax, max] (2^emax is
// on the grid, the element saturates below 2^(emax + 1)), so the rounded block has the same
// shared exponent and every element is already on its grid. Clamped exponents, zeros, short
// blocks, specials and rows that are not whole blocks included; any second rounding mode. Not
// int8 elements: -2 (-128 / 64) is on their grid, and a block whose largest magnitude rounds to
// it moves its shared exponent up when rounded again.
TEST(NumericsFormat, MxFloorBlocksRoundedTwiceAreUnchanged) {
  std::mt19937 rng(11);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> ex(-160, 140);
  const size_t n = 7 * 784 + 100;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    // Each block's scale from its own exponent, with edge blocks: a largest element just below
    // the element's saturation point or its rounding boundary, subnormal and zero blocks.
    const int e = ex(rng);
    const size_t kind = i / 32 % 7;
    double v = std::ldexp(nd(rng), e);
    if (kind == 0) v = std::ldexp(1.0 - 1e-7 * double(i % 5), e);
    if (kind == 1) v = std::ldexp(0.9375 + 0.03 * nd(rng), -130 + int(i % 8));
    if (kind == 2) v = 0;
    x[i] = float(v);
  }
  x[40] = std::numeric_limits<float>::infinity();
  x[900] = std::numeric_limits<float>::quiet_NaN();
  for (const char* elem : {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e3m4"})
    for (int block : {32, 16})
      for (size_t row : {size_t(784), size_t(256), size_t(3), n}) {
        const Format f = parse_format("mx:elem=" + std::string(elem) +
                                      ",block=" + std::to_string(block) + ",scale=floor");
        QuantOptions o;
        o.row = row;
        const auto once = tb::num::quantize(f, x, o);
        for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTowardZero}) {
          QuantOptions again = o;
          again.rounding = r;
          again.seed = 3;
          const auto twice = tb::num::quantize(f, once, again);
          int moved = 0;
          for (size_t i = 0; i < n; ++i) moved += !same(once[i], twice[i]);
          EXPECT_EQ(moved, 0) << f.str() << " row " << row << " " << tb::num::rounding_name(r);
        }
      }
}

// fp32 is binary32 itself: every rounding mode leaves every value's bits as they are, a NaN
// becoming the quiet NaN of its sign; in place too. Against the same grid walked as any other
// float format's (binary32 saturating, which differs only at Inf), on every class of value.
TEST(NumericsFormat, Binary32IsTheIdentityUpToQuietNans) {
  const Format f32 = parse_format("fp32");
  const Format sat = parse_format("fp:e=8,m=23,overflow=sat");
  ASSERT_NE(sat.fp, f32.fp);
  std::mt19937 rng(5);
  std::vector<uint32_t> in_bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u,
                                   0x3F800001u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                                   0x7F800001u, 0xFFBFFFFFu, 0x7FC00000u, 0xFFC00001u, 0x7FFFFFFFu};
  for (int i = 0; i < 4000; ++i) in_bits.push_back(uint32_t(rng()));
  std::vector<float> x(in_bits.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = from_bits(in_bits[i]);
  for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTiesAway,
                           Rounding::kTowardZero}) {
    QuantOptions o;
    o.rounding = r;
    o.seed = 11;
    std::vector<float> y(x.size()), walked(x.size()), inplace = x;
    float amax = -1;
    o.input_amax = &amax;  // the float formats' tiled amax-then-round path
    tb::num::quantize(f32, x.data(), y.data(), x.size(), o);
    o.input_amax = nullptr;
    EXPECT_EQ(amax, std::numeric_limits<float>::infinity());  // the inputs hold +-Inf
    tb::num::quantize(sat, x.data(), walked.data(), x.size(), o);
    tb::num::quantize(f32, inplace.data(), inplace.data(), inplace.size(), o);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t b = in_bits[i];
      const bool nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
      const uint32_t want = nan ? (b & 0x80000000u) | 0x7FC00000u : b;
      ASSERT_EQ(bits(y[i]), want) << std::hex << b << " " << tb::num::rounding_name(r);
      ASSERT_EQ(bits(inplace[i]), want) << std::hex << b << " " << tb::num::rounding_name(r);
      if ((b & 0x7FFFFFFFu) != 0x7F800000u)
        ASSERT_EQ(bits(walked[i]), want) << std::hex << b << " " << tb::num::rounding_name(r);
    }
  }
}

TEST(NumericsFormat, AllFiniteFindsAnyInfOrNan) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * -1e30f;  // the largest stay finite
  x[1] = std::numeric_limits<float>::max();
  x[2] = std::numeric_limits<float>::denorm_min();
  for (size_t n : {size_t(0), size_t(1), size_t(17), size_t(1000)})
    EXPECT_TRUE(tb::num::all_finite(x.data(), n)) << n;
  for (const float bad :
       {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()})
    for (size_t at : {size_t(0), size_t(15), size_t(16), size_t(999)}) {
      std::vector<float> y = x;
      y[at] = bad;
      EXPECT_FALSE(tb::num::all_finite(y.data(), y.size())) << at;
      EXPECT_TRUE(tb::num::all_finite(y.data(), at)) << at;  // everything before it
    }
}

// Fixed point rounded stochastically against its definition in double (k = floor(x 2^F) + 1
// where random_bits(seed, index) * 2^-32 < the remainder; saturated or wrapped), with the same
// words as every other stochastic format, so saturating and wrapping formats round an
// in-range value alike; Inf, NaN, signed zeros and values that round to 0 from below included,
// with and without FTZ/DAZ.
TEST(NumericsFormat, StochasticFixedPointMatchesItsDefinition) {
  std::mt19937 rng(17);
  std::normal_distribution<double> nd(0, 4);
  std::vector<float> x(4099);
  for (auto& v : x) v = float(nd(rng));
  x[7] = INFINITY;
  x[8] = -INFINITY;
  x[9] = NAN;
  x[10] = -0.0f;
  x[11] = -0.01f;
  x[12] = 1e-40f;
  // Small negative values (t - floor(t) = 1 - |t|, which float32 cannot hold), values just off
  // an integer of the grid on either side, and ties.
  for (size_t i = 13; i < 1013; ++i) {
    const double u = std::ldexp(1.0 + double(i % 97) / 97, -int(i % 41));
    x[i] = float(i % 3 == 0 ? -u : i % 3 == 1 ? -(double(i % 7) + u * 1e-3) / 16 : u / 16);
  }
  for (size_t i = 1013; i < 1200; ++i) x[i] = float((double(i % 50) - 25 + 0.5) / 16);
  // Remainders a few ulps from the element's own random word (for f = 4): a decision computed
  // with any rounding (1 - |t| in float32, say) comes out differently for some of them.
  const uint64_t seed = 0x123456789ull, offset = (uint64_t(1) << 32) - 2000;
  for (size_t i = 1200; i < 3200; ++i) {
    const uint32_t r = tb::num::random_bits(seed, offset + i);
    const bool neg = i % 2;
    float f = float(std::ldexp(neg ? 0x1p32 - double(r) : double(r), -32));
    for (int k = int(i / 2 % 3) - 1; k != 0; k += k < 0 ? 1 : -1)
      f = std::nextafter(f, k < 0 ? 0.0f : 1.0f);
    x[i] = (neg ? -f : f) / 16;
  }
  for (const char* name : {"fixed:w=8,f=4", "fixed:w=8,f=4,sat=off", "fixed:w=12,f=6",
                           "fixed:w=16,f=-3", "fixed:w=16,f=0", "fixed:w=24,f=20"})
    for (const bool ftz : {false, true}) {
      const Format f = parse_format(name);
      QuantOptions o;
      o.rounding = Rounding::kStochastic;
      o.seed = seed;
      o.offset = offset;  // the index's high word changes inside the call
      const unsigned saved = _mm_getcsr();
      if (ftz) _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
      const auto y = tb::num::quantize(f, x, o);
      _mm_setcsr(saved);
      const double lo = f.fx.min_value() * std::ldexp(1.0, f.fx.frac_bits);
      const double hi = f.fx.max_value() * std::ldexp(1.0, f.fx.frac_bits);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        // DAZ reads a subnormal input as 0.
        const double xv = ftz && std::fpclassify(x[i]) == FP_SUBNORMAL ? 0.0 : double(x[i]);
        double want;
        if (std::isnan(xv)) {
          want = NAN;
        } else if (std::isinf(xv)) {
          want = std::ldexp(xv > 0 ? hi : lo, -f.fx.frac_bits);
        } else {
          const double t = std::ldexp(xv, f.fx.frac_bits), fl = std::floor(t);
          const uint32_t rnd = tb::num::random_bits(o.seed, o.offset + i);
          // In long double (64-bit significands): t - fl is exact for every t here.
          double k = fl + double((long double)rnd * 0x1p-32L < (long double)t - fl);
          if (f.fx.saturate)
            k = std::min(std::max(k, lo), hi);
          else if (k < lo || k > hi)
            k = std::fmod(std::fmod(k - lo, hi - lo + 1) + (hi - lo + 1), hi - lo + 1) + lo;
          want = std::ldexp(k, -f.fx.frac_bits);
        }
        if (!same(y[i], float(want)) && ++bad <= 5)
          ADD_FAILURE() << name << (ftz ? " FTZ/DAZ" : "") << " x=" << x[i] << " got " << y[i]
                        << " want " << want;
      }
      EXPECT_EQ(bad, 0) << name;
    }
}

TEST(NumericsFormat, ThreadsAndChunksDoNotChangeResults) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 10);
  std::vector<float> x(300000);
  for (auto& v : x) v = nd(rng);
  for (const char* name : {"e4m3", "mxfp6_e3m2", "bfp8", "fixed:w=12,f=6", "mxint8"}) {
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
      QuantOptions o;
      o.rounding = r;
      o.seed = 9;
      o.row = 1000;
      const auto one = tb::num::quantize(parse_format(name), x, o);
      o.threads = 3;
      EXPECT_EQ(tb::num::quantize(parse_format(name), x, o), one) << name;
      // Quantizing the second half alone, with its offset, gives the same second half.
      QuantOptions h = o;
      h.offset = 150000;
      std::vector<float> tail(x.begin() + 150000, x.end());
      const auto t = tb::num::quantize(parse_format(name), tail, h);
      EXPECT_TRUE(std::equal(t.begin(), t.end(), one.begin() + 150000)) << name;
    }
  }
}

// Outputs past the caches are written with non-temporal stores: the same values, whatever the
// alignment, tile remainder, row length, rounding or per-tensor scale.
TEST(NumericsFormat, StreamedOutputsMatchCachedOnes) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 3);
  // Above 2 x 65536 elements, so that two threads split it.
  std::vector<float> x(140001);
  for (auto& v : x) v = nd(rng);
  // Magnitudes over 2^-60..2^60 here and there, and the specials: blocks the streamed kernels
  // leave to their plain loops (NaN and Inf blocks, blocks too small for the fast grid).
  for (size_t i = 0; i < x.size(); i += 97) x[i] = std::ldexp(x[i], int(i / 97 % 121) - 60);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[70001] = std::numeric_limits<float>::infinity();
  x[100003] = -std::numeric_limits<float>::infinity();
  x[3000] = 1e-42f;
  // AVX-512 kernels write streamed outputs themselves (bf16, e4m3, e5m2, MX, BFP and NVFP4 in
  // every mode, but ties away and toward zero unscaled only and NVFP4 on rows of whole tiles;
  // fixed point to nearest even and stochastically, MX int8 in every mode); the others
  // through an L1 tile. Rows of 1000 are not whole NVFP4 tiles, rows of 1024 are, and row 0 (the
  // tensor as one row) is whole tiles only at shift 1. fp32 (binary32's one-pass identity) goes
  // through the tile.
  for (const char* name : {"e4m3", "e5m2", "bf16", "fp:e=8,m=3,bias=140", "mxfp8_e4m3", "bfp8",
                           "mx:elem=e4m3,block=32,scale=rceil", "mx:elem=int8,block=32",
                           "mx:elem=int8,block=16", "nvfp4", "nvfp4_2d", "fixed:w=8,f=4", "fp32"}) {
    const Format f = parse_format(name);
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTiesAway,
                       Rounding::kTowardZero}) {
      for (size_t shift : {0, 1, 3}) {  // output misaligned by 0, 4 and 12 bytes
        for (size_t row : {1000, 1024, 0}) {
          for (float scale : {1.0f, 0.37f}) {  // a recipe's per-tensor scale: floats only
            if (scale != 1.0f && f.kind != Format::Kind::kFloat) continue;
            QuantOptions o;
            o.rounding = r;
            o.seed = 2;
            o.row = row;
            o.scale = scale;
            const size_t n = x.size() - shift;
            std::vector<float> cached(n), buffer(n + 32);
            // From a 64-byte boundary, as LibTorch allocates, plus the shift.
            const size_t lead = (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64 / 4;
            float* streamed = buffer.data() + lead + shift;
            tb::num::quantize(f, x.data(), cached.data(), n, o);
            o.stream_above = 1000;
            o.threads = 2;
            tb::num::quantize(f, x.data(), streamed, n, o);
            EXPECT_TRUE(std::equal(cached.begin(), cached.end(), streamed,
                                   [](float a, float b) { return bits(a) == bits(b); }))
                << name << " " << tb::num::rounding_name(r) << " shift " << shift << " row " << row
                << " scale " << scale;
          }
        }
      }
    }
  }
}

#if defined(__SSE2__)
// trainbench's runtime sets flush-to-zero and denormals-are-zero; the kernels that round with
// float additions (narrow formats) must give the same bits there, subnormal inputs included.
TEST(NumericsFormat, FlushedDenormalsDoNotChangeResults) {
  std::vector<float> xs;
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) xs.push_back(from_bits(rng()));
  for (uint32_t m = 1; m < (1u << 23); m = m * 3 + 1) {  // float32 subnormals and neighbours
    xs.push_back(from_bits(m));
    xs.push_back(from_bits(m | 0x80000000u));
    xs.push_back(from_bits(m + 0x00800000u));
  }
  const unsigned saved = _mm_getcsr();
  std::vector<std::string> names(std::begin(kFloatPresets), std::end(kFloatPresets));
  // Grids reaching below float32's normals (the float-add kernels must not take them).
  for (const char* c : {"fp:e=7,m=3,bias=140", "fp:e=7,m=2,bias=130,sub=off"}) names.push_back(c);
  for (const auto& name : names) {
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTowardZero}) {
      QuantOptions o;
      o.rounding = r;
      o.seed = 3;
      const auto plain = tb::num::quantize(parse_format(name), xs, o);
      _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
      const auto flushed = tb::num::quantize(parse_format(name), xs, o);
      _mm_setcsr(saved);
      int bad = 0;
      for (size_t i = 0; i < xs.size() && bad < 3; ++i)
        if (!same(plain[i], flushed[i])) {
          ++bad;
          ADD_FAILURE() << name << " " << tb::num::rounding_name(r) << " x=0x" << std::hex
                        << bits(xs[i]) << ": " << bits(plain[i]) << " vs " << bits(flushed[i]);
        }
    }
  }
}
#endif

// The custom MAD unit against the obvious sequential loop, rounding each exact product and
// each exact sum once (in double, where both are exact for these operands).
TEST(NumericsMad, SequentialMatchesStepByStepReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-2, 2);
  const int64_t M = 5, N = 7, K = 33;
  const Format in = parse_format("e4m3");
  std::vector<float> A(M * K), B(K * N), C(M * N);
  for (auto& v : A) v = quantize_one(in, ud(rng));
  for (auto& v : B) v = quantize_one(in, ud(rng));
  for (const char* acc : {"fp16", "bf16", "e5m2", "e6m9"}) {
    const auto u =
        tb::num::parse_mad(std::string("mad:mul=e5m2,acc=") + acc + ",width=1,order=sequential");
    tb::num::mad_matmul(u, A.data(), B.data(), C.data(), M, N, K);
    const FloatFormat mul = parse_format("e5m2").fp, af = parse_format(acc).fp;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p =
              reference(double(A[i * K + k]) * B[k * N + j], mul, Rounding::kNearestEven);
          s = reference(s + p, af, Rounding::kNearestEven);
        }
        EXPECT_EQ(C[i * N + j], float(s)) << acc << " " << i << "," << j;
      }
  }
  // fp32 everywhere, sequential: exactly the plain float loop.
  const auto u32 = tb::num::parse_mad("mad:mul=fp32,acc=fp32,width=1,order=sequential");
  tb::num::mad_matmul(u32, A.data(), B.data(), C.data(), M, N, K, 2);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
      EXPECT_EQ(C[i * N + j], s);
    }
}

TEST(NumericsMad, OrderAndWidthMatterAndRoundTrip) {
  // 1 + 16 * 2^-11 in fp16: sequentially each 2^-11 is lost to ties-to-even (1 + 2^-11 is a
  // tie); summed in lanes/tree first, the small terms survive.
  const int64_t K = 17;
  std::vector<float> A(K, 1.0f), B(K, std::ldexp(1.0f, -11));
  B[0] = 1.0f;
  float seq, lanes, tree;
  tb::num::mad_matmul(tb::num::parse_mad("mad:acc=fp16,width=4,order=sequential"), A.data(),
                      B.data(), &seq, 1, 1, K);
  tb::num::mad_matmul(tb::num::parse_mad("mad:acc=fp16,width=4,order=lanes"), A.data(), B.data(),
                      &lanes, 1, 1, K);
  tb::num::mad_matmul(tb::num::parse_mad("mad:acc=fp16,width=4,order=tree"), A.data(), B.data(),
                      &tree, 1, 1, K);
  EXPECT_EQ(seq, 1.0f);
  EXPECT_EQ(lanes, 1.0f + 12 * std::ldexp(1.0f, -11));  // lane 0 loses its four
  EXPECT_EQ(tree, 1.0f + 16 * std::ldexp(1.0f, -11));
  for (const char* t : {"mad:mul=e5m2,acc=fp16,width=4,order=lanes",
                        "mad:mul=bf16,acc=fp32,width=16,order=tree,rounding=stochastic"}) {
    const auto u = tb::num::parse_mad(t);
    EXPECT_EQ(u.str(), t);
    EXPECT_EQ(tb::num::parse_mad(u.str()), u);
  }
  EXPECT_THROW(tb::num::parse_mad("mad:width=0"), tb::UsageError);
  EXPECT_THROW(tb::num::parse_mad("mad:acc=mxfp8_e4m3"), tb::UsageError);
  EXPECT_THROW(tb::num::parse_mad("mad:order=random"), tb::UsageError);
}

// The scalar definition of the unit, one element of C at a time: each exact product and each
// exact sum rounded to odd in float32 (TwoSum for the sum's error), then quantize_one() to the
// format; fp32 itself is plain float arithmetic. mad_matmul's vectorised kernel must agree
// with it bit for bit (NaNs compare as NaN: which of two NaN operands an addition propagates
// is the compiler's choice).
float odd_ref(float s, float err) {
  if (err == 0 || !std::isfinite(s)) return s;
  const bool beyond = (err > 0) == (s > 0);
  return from_bits((beyond ? bits(s) : bits(s) - 1) | 1u);
}
float mul_ref(const Format& f, Rounding r, float a, float b) {
  if (f == Format{}) return a * b;
  const double d = double(a) * double(b);
  const float p = float(d);
  return quantize_one(f, odd_ref(p, float(d - double(p))), r);
}
float add_ref(const Format& f, Rounding r, float a, float b) {
  if (f == Format{}) return a + b;
  const float s = a + b, bb = s - a, err = (a - (s - bb)) + (b - bb);
  return quantize_one(f, odd_ref(s, err), r);
}
float mad_ref(const tb::num::MadUnit& u, const float* A, const float* B, int64_t i, int64_t j,
              int64_t N, int64_t K) {
  using Order = tb::num::MadUnit::Order;
  const auto& P = u.product;
  const auto& S = u.accumulator;
  const Rounding r = u.rounding;
  const int64_t W = u.width;
  const auto tree = [&](std::vector<float> v) {
    for (int64_t step = 1; step < int64_t(v.size()); step *= 2)
      for (int64_t a = 0; a + step < int64_t(v.size()); a += 2 * step)
        v[a] = add_ref(S, r, v[a], v[a + step]);
    return v[0];
  };
  std::vector<float> lanes(u.order == Order::kLanes ? W : 1, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += W) {
    std::vector<float> group;
    for (int64_t k = k0; k < std::min(K, k0 + W); ++k) {
      const float p = mul_ref(P, r, A[i * K + k], B[k * N + j]);
      if (u.order == Order::kTree) group.push_back(p);
      float& acc = lanes[u.order == Order::kLanes ? k - k0 : 0];
      if (u.order != Order::kTree) acc = add_ref(S, r, acc, p);
    }
    if (u.order == Order::kTree) lanes[0] = add_ref(S, r, lanes[0], tree(group));
  }
  return u.order == Order::kLanes ? tree(lanes) : lanes[0];
}

TEST(NumericsMad, VectorisedKernelMatchesScalarDefinition) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-2, 2);
  std::uniform_int_distribution<int> pick(0, 15);
  // Values that exercise every branch of the rounding: ties of the narrow formats, values
  // that overflow fp16/e5m2, float32 subnormals and the formats' own subnormals, signed
  // zeros, Inf and NaN; the rest ordinary.
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f + std::ldexp(1.0f, -11),
                            1.125f,
                            -1.375f,
                            65504.0f,
                            70000.0f,
                            -1e9f,
                            std::ldexp(1.0f, -140),
                            -1e-40f,
                            std::ldexp(1.0f, -16),
                            std::ldexp(3.0f, -18),
                            INFINITY,
                            -INFINITY,
                            NAN};
  auto value = [&](bool rare) {
    const int c = pick(rng);
    if (rare && c < 15) return specials[c];
    return c < 4 ? quantize_one(parse_format("e4m3"), ud(rng)) : ud(rng) * (c < 12 ? 1.0f : 300.0f);
  };
  const int64_t M = 3, N = 70, K = 37;  // N: a full column tile and a partial one
  for (const char* unit :
       {"mad:mul=e5m2,acc=fp16,width=4,order=lanes", "mad:mul=e4m3,acc=bf16,width=3,order=tree",
        "mad:mul=fp32,acc=fp16,width=1,order=sequential",
        "mad:mul=e5m2,acc=fp32,width=8,order=lanes", "mad:mul=fp32,acc=fp32,width=4,order=lanes",
        "mad:mul=bf16,acc=e5m2,width=5,order=tree",
        "mad:mul=e5m2,acc=fp16,width=4,order=lanes,rounding=ties-away",
        "mad:mul=e4m3fnuz,acc=e2m1,width=2,order=sequential,rounding=toward-zero"}) {
    const auto u = tb::num::parse_mad(unit);
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<float> A(M * K), B(K * N), C(M * N);
      for (auto& v : A) v = value(trial > 0 && pick(rng) < 3);
      for (auto& v : B) v = value(trial > 0 && pick(rng) < 3);
      tb::num::mad_matmul(u, A.data(), B.data(), C.data(), M, N, K, 1 + trial % 2);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float want = mad_ref(u, A.data(), B.data(), i, j, N, K);
          EXPECT_TRUE(same(C[i * N + j], want))
              << unit << " trial " << trial << " C[" << i << "," << j << "] = " << C[i * N + j]
              << " (" << bits(C[i * N + j]) << "), expected " << want << " (" << bits(want) << ")";
        }
    }
  }
}

// The lean kernel (mad.cc) leaves out the products' error term and the sums' TwoSum where the
// operands make them 0 (products exact in float32, sums rounding once through float32 to at
// most 11 bits): operands quantized to 8-bit and 4-bit formats, at magnitudes that overflow the
// accumulators (fp16 to Inf, then Inf - Inf), reach their subnormals and tie, must give the
// scalar definition's bits. Operands it cannot take (24-bit significands) take the fused kernel.
TEST(NumericsMad, LeanKernelMatchesScalarDefinition) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-2, 2);
  std::uniform_int_distribution<int> pick(0, 15);
  const float specials[] = {0.0f,
                            -0.0f,
                            57344.0f,
                            -57344.0f,
                            448.0f,
                            -240.0f,
                            6.0f,
                            std::ldexp(1.0f, -16),
                            -std::ldexp(3.0f, -16),
                            std::ldexp(1.0f, -9),
                            1.25f,
                            -1.75f};
  struct Case {
    const char* unit;
    const char* operands;  // the format the operands are quantized to
  };
  for (const Case c : {Case{"mad:mul=e5m2,acc=fp16,width=4,order=lanes", "e5m2"},
                       Case{"mad:mul=e5m2,acc=fp16,width=1,order=sequential", "e5m2"},
                       Case{"mad:mul=e4m3,acc=fp16,width=3,order=tree", "e4m3"},
                       Case{"mad:mul=e5m2,acc=fp32,width=8,order=lanes", "e5m2"},
                       Case{"mad:mul=e2m1,acc=e4m3,width=4,order=lanes", "e4m3"},
                       Case{"mad:mul=e2m1,acc=e5m2,width=2,order=tree", "e2m1"},
                       Case{"mad:mul=fp32,acc=fp32,width=4,order=lanes", "fp32"}}) {
    const auto u = tb::num::parse_mad(c.unit);
    const Format in = parse_format(c.operands);
    const int64_t M = 3, N = 37, K = 70;  // N: a partial vector of 16 at the end of each row
    for (int trial = 0; trial < 4; ++trial) {
      // Trial 0: ordinary magnitudes; then a growing share of the specials' extremes.
      std::vector<float> A(M * K), B(K * N), C(M * N);
      auto value = [&] {
        const int r = pick(rng);
        const float v = r < 3 * trial ? specials[pick(rng) % 12] : ud(rng) * (r < 12 ? 1 : 64);
        // e4m3 has no Inf: what lies beyond 448 would become NaN, which the lean kernel
        // leaves to the fused one.
        return quantize_one(in,
                            std::string(c.operands) == "e4m3" ? std::clamp(v, -448.0f, 448.0f) : v);
      };
      for (auto& v : A) v = value();
      for (auto& v : B) v = value();
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c"))
        EXPECT_EQ(tb::num::mad_kernel(u, A.data(), B.data(), M, N, K), "lean") << c.unit;
#endif
      tb::num::mad_matmul(u, A.data(), B.data(), C.data(), M, N, K, 1 + trial % 2);
#if defined(__SSE2__)
      // trainbench's runtime sets flush-to-zero and denormals-are-zero: the same bits there
      // (the F16C conversions keep fp16's subnormals under FTZ; no float32 value the kernel
      // adds or rounds is subnormal).
      std::vector<float> flushed(C.size());
      const unsigned saved = _mm_getcsr();
      _mm_setcsr(saved | 0x8040);
      tb::num::mad_matmul(u, A.data(), B.data(), flushed.data(), M, N, K, 1);
      _mm_setcsr(saved);
      for (size_t e = 0; e < C.size(); ++e)
        EXPECT_TRUE(same(C[e], flushed[e])) << c.unit << " with FTZ/DAZ, element " << e;
#endif
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float want = mad_ref(u, A.data(), B.data(), i, j, N, K);
          EXPECT_TRUE(same(C[i * N + j], want))
              << c.unit << " trial " << trial << " C[" << i << "," << j << "] = " << C[i * N + j]
              << " (" << bits(C[i * N + j]) << "), expected " << want << " (" << bits(want) << ")";
        }
    }
  }
  // Full float32 significands: products are not exact, so the fused kernel runs.
  std::vector<float> A(4 * 4), B(4 * 4);
  for (auto& v : A) v = 1.0f + std::ldexp(1.0f, -23);  // 24 significant bits
  for (auto& v : B) v = 3.0f;                          // 2
  const auto u = tb::num::parse_mad("mad:mul=e5m2,acc=fp16,width=4,order=lanes");
  EXPECT_EQ(tb::num::mad_kernel(u, A.data(), B.data(), 4, 4, 4), "fused");
  EXPECT_EQ(tb::num::mad_kernel(tb::num::parse_mad("mad:mul=e5m2,acc=fp16,rounding=stochastic"),
                                A.data(), B.data(), 4, 4, 4),
            "scalar");
}

}  // namespace
