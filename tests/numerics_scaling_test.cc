// Scaling recipes and scaled block formats against references written here from their published
// definitions (not from the library's code): Transformer Engine 2.x's delayed scaling, torchao's
// MX scale calculation modes, Transformer Engine's NVFP4 two-level scale, and per-block
// scaling. Every comparison is bit for bit.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "base/errors.h"
#include "numerics/format.h"
#include "numerics/quantize.h"
#include "numerics/scaling.h"

namespace {

using tb::num::Format;
using tb::num::parse_format;
using tb::num::parse_scaling;
using tb::num::QuantOptions;
using tb::num::Rounding;
using tb::num::Scaling;

constexpr float kFltMax = std::numeric_limits<float>::max();

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Rounds v to nearest-even on a binary grid of `man` mantissa bits with normals from 2^emin and
// subnormals below, clipping at `max` (saturating, as the recipes' casts do). In double: every
// quotient here is exact.
double round_sat(double v, int man, int emin, double max, Rounding mode = Rounding::kNearestEven) {
  if (std::isnan(v)) return v;
  const double a = std::fabs(v);
  if (a == 0) return v;
  if (std::isinf(a)) return std::copysign(max, v);
  const int e = std::max(emin, int(std::floor(std::log2(a))));
  const double quantum = std::ldexp(1.0, e - man);
  const double q = a / quantum;
  const double k = mode == Rounding::kTiesAway     ? std::round(q)
                   : mode == Rounding::kTowardZero ? std::trunc(q)
                                                   : std::nearbyint(q);  // ties to even
  const double r = std::min(max, k * quantum);
  return std::copysign(r, v);
}
float e4m3(float v) { return float(round_sat(v, 3, -6, 448)); }
float e2m1(float v, Rounding mode = Rounding::kNearestEven) {
  return float(round_sat(v, 1, 0, 6, mode));
}

// --- Delayed scaling ----------------------------------------------------------------------------

// Transformer Engine's delayed scaling as its documentation and kernel define it, written as a
// window: steps whose amax is 0 are skipped; the window holds the last H amaxes; the scale is
// (max * 2^-M) / (the window's max, or its newest), kept where that amax is 0 or not finite,
// FLT_MAX where the quotient overflows; 1 at first.
std::vector<float> reference_delayed(const std::vector<float>& amaxes, int h, bool recent,
                                     int margin, float max) {
  std::deque<float> window;
  float scale = 1;
  std::vector<float> scales;  // the scale each step used
  for (float a : amaxes) {
    scales.push_back(scale);
    if (a == 0) continue;
    window.push_back(a);
    if (int(window.size()) > h) window.pop_front();
    float use = recent ? a : 0;
    if (!recent)
      for (float w : window) use = std::fmax(use, w);
    const float scaled_max = max * std::pow(2.0f, float(-margin));
    if (std::isfinite(use) && use > 0) scale = scaled_max / use;
    if (std::isinf(scale)) scale = kFltMax;
  }
  return scales;
}

TEST(NumericsScaling, DelayedScalingFollowsTransformerEngine) {
  std::mt19937 gen(5);
  std::lognormal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> amaxes;
  for (int i = 0; i < 300; ++i) amaxes.push_back(dist(gen));
  amaxes[10] = 0;  // a step that did not use the site
  amaxes[11] = 0;
  amaxes[50] = INFINITY;  // an overflowed tensor: the scale holds while it is in the window
  amaxes[90] = 1e-38f;    // a tiny amax: 448 / 1e-38 overflows float32 -> FLT_MAX
  amaxes[200] = 3e38f;
  for (int h : {1, 2, 16, 1024})
    for (bool recent : {false, true})
      for (int margin : {0, 3}) {
        const auto want = reference_delayed(amaxes, h, recent, margin, 448.0f);
        tb::num::AmaxHistory hist(h);
        int bad = 0;
        for (size_t i = 0; i < amaxes.size(); ++i) {
          bad += !same(hist.scale(), want[i]);
          // Two calls in the step: the history takes their larger amax.
          hist.record(amaxes[i] * 0.5f);
          hist.record(amaxes[i]);
          hist.end_step(448.0f, margin, recent);
        }
        EXPECT_EQ(bad, 0) << "h " << h << " recent " << recent << " margin " << margin;
      }
  // After a step the history keeps the last H - 1 nonzero amaxes, oldest first: with the next
  // step's own they make the window of H.
  tb::num::AmaxHistory w(3);
  for (float a : {1.0f, 2.0f, 0.0f, 3.0f, 4.0f}) {
    w.record(a);
    w.end_step(448.0f, 0, false);
  }
  EXPECT_EQ(w.window(), (std::vector<float>{3.0f, 4.0f}));
  EXPECT_EQ(w.scale(), 448.0f / 4.0f);
}

TEST(NumericsScaling, CurrentAndBlockScalesFollowTheirDefinitions) {
  EXPECT_EQ(tb::num::current_scale(448.0f, 3.0f, 0), 448.0f / 3.0f);
  EXPECT_EQ(tb::num::current_scale(448.0f, 3.0f, 2), 448.0f / 3.0f / 4.0f);
  EXPECT_EQ(tb::num::current_scale(448.0f, 0.0f, 0), 1.0f);
  EXPECT_EQ(tb::num::current_scale(448.0f, INFINITY, 0), 1.0f);
  EXPECT_EQ(tb::num::current_scale(448.0f, 1e-45f, 0), kFltMax);
  EXPECT_EQ(tb::num::block_scale(448.0f, 3.0f, false), 448.0f / 3.0f);
  EXPECT_EQ(tb::num::block_scale(448.0f, 3.0f, true), 128.0f);  // 149.3 rounded down
  EXPECT_EQ(tb::num::block_scale(448.0f, 1e-45f, false), kFltMax);
  EXPECT_EQ(tb::num::block_scale(448.0f, 0.0f, true), 1.0f);
}

// --- Scaled rounding: unscaled e4m3 clips and flushes what scaled e4m3 keeps --------------------

TEST(NumericsScaling, ScaledE4M3KeepsWhatUnscaledE4M3Loses) {
  // Values from 2^-14 to 2^12: beyond both ends of e4m3's [2^-9, 448].
  std::vector<float> x;
  for (int e = -14; e <= 12; ++e) x.push_back(std::ldexp(1.3f, e));
  const Format f = parse_format("fp:e=4,m=3,special=fn,overflow=sat");
  const float threshold = tb::num::overflow_threshold(f);
  // 448 + half of its 32-wide ulp is the tie, which rounds to 448 (even): overflow is past it.
  EXPECT_EQ(threshold, std::nextafter(464.0f, INFINITY));
  // e5m2's tie (57344 + 4096) rounds up, to Inf: it overflows.
  EXPECT_EQ(tb::num::overflow_threshold(parse_format("e5m2")), 61440.0f);
  const auto plain = tb::num::quantize(f, x);
  const auto pc = tb::num::count_range(x.data(), plain.data(), x.size(), threshold);
  EXPECT_EQ(pc.overflow, 4u);   // 1.3 * 2^9 .. 2^12, past 464
  EXPECT_EQ(pc.underflow, 4u);  // 1.3 * 2^-14 .. 2^-11, below half the smallest subnormal (2^-10)
  // A 1 x 9 block scale per 9 values: each block's range fits e4m3's.
  Scaling s = parse_scaling("block:1x9", f, "e4m3");
  std::vector<float> y(x.size());
  tb::num::RangeCounts sc;
  tb::num::quantize_block_scaled(f, s, x.data(), y.data(), x.size(), x.size(), {}, &sc);
  EXPECT_EQ(sc.overflow, 0u);
  EXPECT_EQ(sc.underflow, 0u);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i], x[i] / 16) << i;  // e4m3's relative precision, at every magnitude
  }
  EXPECT_GT(std::fabs(plain.back() - x.back()), x.back() / 2);
}

// A per-tensor scale is applied in the rounding pass itself where the grid has a shortcut: the
// result is still the scaled value rounded and scaled back, in float32, with stochastic
// rounding drawing the same bits for the same element.
TEST(NumericsScaling, ScaledRoundingIsTheScaledValueRoundedAndScaledBack) {
  std::mt19937 gen(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(10000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = n(gen) * std::exp2(float(int(i % 40) - 30));
  x[7] = std::numeric_limits<float>::infinity();
  x[8] = std::numeric_limits<float>::quiet_NaN();
  x[9] = -0.0f;
  for (const char* name : {"e4m3", "e5m2", "bf16", "fp:e=4,m=3,special=fn,overflow=sat"})
    for (auto r : {tb::num::Rounding::kNearestEven, tb::num::Rounding::kStochastic})
      for (float scale : {1024.0f, 3.0e-3f, 448.0f / 7.25f}) {
        const Format f = parse_format(name);
        QuantOptions o;
        o.rounding = r;
        o.seed = 77;
        o.offset = 4093;
        o.scale = scale;
        const auto y = tb::num::quantize(f, x, o);
        std::vector<float> scaled(x.size());
        for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * scale;
        o.scale = 1;
        const auto q = tb::num::quantize(f, scaled, o);
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += !same(y[i], q[i] * (1.0f / scale));
        EXPECT_EQ(bad, 0) << name << " rounding " << int(r) << " scale " << scale;
      }
}

// scale_row, which trainbench quantize prints: each tile's amax and scale by the recipe's
// definition, each value scaled, rounded and multiplied by the inverse scale, and the value
// kept bit for bit the one a point's own path keeps (quantize() with the scale for current
// scaling, quantize_block_scaled for block scaling), stochastic rounding included.
TEST(NumericsScaling, ScaleRowShowsWhatThePointKeeps) {
  std::vector<float> x = {1000.0f, -3.5f, 0.01f, 1e-4f, 2e-3f, -7.0f, 0.0f, 65.0f};
  for (const char* fmt_text : {"e4m3", "e5m2", "fixed:w=8,f=4"})
    for (const char* recipe : {"current", "current:2", "block:1x2", "block:1x4:pow2"})
      for (auto r : {Rounding::kNearestEven, Rounding::kStochastic}) {
        const Format plain = parse_format(fmt_text);
        const Scaling s = parse_scaling(recipe, plain, fmt_text);
        const Format f = tb::num::saturating(plain);
        QuantOptions o;
        o.rounding = r;
        o.seed = 9;
        const auto row = tb::num::scale_row(f, s, x, o);
        const std::string what =
            std::string(fmt_text) + "@" + recipe + " " + tb::num::rounding_name(r);
        const float max = tb::num::scaling_max(f);
        // Each value's scale by the recipe's definition, written here.
        std::vector<float> want(x.size());
        if (s.kind == Scaling::Kind::kCurrent) {
          ASSERT_EQ(row.tiles.size(), 1u) << what;
          EXPECT_EQ(row.tiles[0].amax, 1000.0f) << what;
          for (auto& w : want) w = max / 1000.0f / std::ldexp(1.0f, s.margin);
        } else {
          const size_t c = size_t(s.block_cols);
          ASSERT_EQ(row.tiles.size(), x.size() / c) << what;
          for (size_t t = 0; t < row.tiles.size(); ++t) {
            float amax = 0;
            for (size_t i = t * c; i < (t + 1) * c; ++i) amax = std::fmax(amax, std::fabs(x[i]));
            EXPECT_EQ(row.tiles[t].first, t * c) << what;
            EXPECT_EQ(row.tiles[t].amax, amax) << what;
            for (size_t i = t * c; i < (t + 1) * c; ++i)
              want[i] = tb::num::block_scale(max, amax, s.pow2);
          }
        }
        // The value kept by definition: the scaled value rounded (the call's stream), times the
        // inverse scale; against the point's own paths, which scale_row's `out` comes from.
        std::vector<float> scaled(x.size()), kept(x.size());
        for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * want[i];
        const auto q = tb::num::quantize(f, scaled, o);
        for (size_t i = 0; i < x.size(); ++i) kept[i] = q[i] * (1.0f / want[i]);
        for (size_t i = 0; i < x.size(); ++i) {
          const float sc =
              row.tiles[s.kind == Scaling::Kind::kCurrent ? 0 : i / s.block_cols].scale;
          EXPECT_EQ(sc, want[i]) << what << " value " << i;
          EXPECT_TRUE(same(row.scaled[i], x[i] * sc)) << what << " value " << i;
          EXPECT_TRUE(same(row.out[i], row.rounded[i] * (1.0f / sc))) << what << " value " << i;
          EXPECT_TRUE(same(row.out[i], kept[i])) << what << " value " << i;
        }
      }
  // What one row cannot show: delayed scaling (no earlier steps), tiles of several rows, a
  // block that does not divide the row; each a one-line usage error naming the recipe.
  const Format e4m3 = tb::num::saturating(parse_format("e4m3"));
  for (const auto& [recipe, says] :
       std::vector<std::pair<const char*, const char*>>{{"delayed:16", "earlier steps"},
                                                        {"block:2x2", "no tiles of 2 rows"},
                                                        {"block:1x3", "3 columns do not divide"}}) {
    try {
      tb::num::scale_row(e4m3, parse_scaling(recipe, e4m3, "e4m3"), x, {});
      ADD_FAILURE() << recipe << " was taken";
    } catch (const tb::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  // The format a scaled point rounds to: clipping where the plain format overflows.
  EXPECT_EQ(tb::num::saturating(parse_format("e4m3")).fp.overflow, tb::num::Overflow::kSaturate);
  EXPECT_TRUE(tb::num::saturating(parse_format("fixed:w=8,f=4,sat=off")).fx.saturate);
}

// QuantOptions::input_amax: tensor_amax's figure (Inf counts, NaN does not) and unchanged
// outputs, on one thread and three, through the tiles of streamed outputs, and for a block
// format (a separate pass there).
TEST(NumericsScaling, InputAmaxIsTensorAmaxAndChangesNothing) {
  std::mt19937 gen(9);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(300001);
  for (auto& v : x) v = nd(gen);
  x[123457] = 1e4f;
  x[7] = std::numeric_limits<float>::quiet_NaN();
  for (bool inf : {false, true}) {
    if (inf) x[200000] = -std::numeric_limits<float>::infinity();
    const float want = tb::num::tensor_amax(x.data(), x.size(), 1);
    EXPECT_EQ(want, inf ? std::numeric_limits<float>::infinity() : 1e4f);
    for (const char* name : {"e4m3", "bf16", "mxfp8_e4m3"})
      for (int threads : {1, 3})
        for (size_t stream_above : {size_t(0), size_t(1000)}) {
          const Format f = parse_format(name);
          QuantOptions o;
          o.rounding = tb::num::Rounding::kStochastic;
          o.seed = 5;
          o.scale = f.kind == Format::Kind::kFloat ? 0.37f : 1.0f;
          o.threads = threads;
          o.stream_above = stream_above;
          o.row = 1000;
          const auto plain = tb::num::quantize(f, x, o);
          float amax = -1;
          o.input_amax = &amax;
          const auto with = tb::num::quantize(f, x, o);
          EXPECT_EQ(amax, want) << name << " threads " << threads;
          EXPECT_EQ(std::memcmp(plain.data(), with.data(), x.size() * sizeof(float)), 0)
              << name << " threads " << threads << " stream above " << stream_above;
        }
  }
}

TEST(NumericsScaling, BlockScalingMatchesItsDefinition) {
  std::mt19937 gen(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const size_t rows = 40, cols = 64;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = n(gen) * std::exp2(float(int(i / 64) % 20 - 10));
  const Format f = parse_format("fp:e=4,m=3,special=fn,overflow=sat");
  for (const char* text : {"block:1x32", "block:16x16:pow2", "block:128x128"}) {
    const Scaling s = parse_scaling(text, f, "e4m3");
    std::vector<float> y(x.size());
    tb::num::quantize_block_scaled(f, s, x.data(), y.data(), x.size(), cols, {}, nullptr);
    const size_t br = size_t(s.block_rows), bc = std::min(cols, size_t(s.block_cols));
    int bad = 0;
    for (size_t r0 = 0; r0 < rows; r0 += br)
      for (size_t c0 = 0; c0 < cols; c0 += bc) {
        float amax = 0;
        for (size_t r = r0; r < std::min(rows, r0 + br); ++r)
          for (size_t c = c0; c < c0 + bc; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
        float scale = 448.0f / amax;
        if (s.pow2) scale = std::exp2(std::floor(std::log2(scale)));
        for (size_t r = r0; r < std::min(rows, r0 + br); ++r)
          for (size_t c = c0; c < c0 + bc; ++c) {
            const size_t i = r * cols + c;
            bad += !same(y[i], e4m3(x[i] * scale) * (1.0f / scale));
          }
      }
    EXPECT_EQ(bad, 0) << text;
  }
  // A tile that does not divide the row is refused, naming both.
  std::vector<float> y(x.size());
  try {
    tb::num::quantize_block_scaled(f, parse_scaling("block:1x48", f, "e4m3"), x.data(), y.data(),
                                   x.size(), cols, {}, nullptr);
    ADD_FAILURE() << "block:1x48 on rows of 64 accepted";
  } catch (const tb::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("48 columns do not divide the tensor's rows of 64"),
              std::string::npos)
        << e.what();
  }
}

// Counting or not, per-block scaling rounds the same: the one-pass path (float formats, not
// counting) and the two-pass one (counting, or fixed point) agree bit for bit.
TEST(NumericsScaling, BlockScalingRoundsTheSameWhetherItCountsOrNot) {
  std::mt19937 gen(13);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const size_t rows = 8, cols = 96;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = n(gen) * std::exp2(float(int(i / 32) % 16 - 8));
  for (const char* name : {"fp:e=4,m=3,special=fn,overflow=sat", "e5m2", "fixed:w=8,f=4"})
    for (auto r : {tb::num::Rounding::kNearestEven, tb::num::Rounding::kStochastic}) {
      const Format f = parse_format(name);
      const Scaling s = parse_scaling("block:2x32", f, name);
      QuantOptions o;
      o.rounding = r;
      o.seed = 3;
      o.offset = 17;
      std::vector<float> counted(x.size()), fast(x.size()), streamed(x.size());
      tb::num::RangeCounts c;
      tb::num::quantize_block_scaled(f, s, x.data(), counted.data(), x.size(), cols, o, &c);
      tb::num::quantize_block_scaled(f, s, x.data(), fast.data(), x.size(), cols, o, nullptr);
      // An output past the caches is written with non-temporal stores: the same values.
      QuantOptions st = o;
      st.stream_above = 100;
      tb::num::quantize_block_scaled(f, s, x.data(), streamed.data(), x.size(), cols, st, nullptr);
      int bad = 0, bad_streamed = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += !same(counted[i], fast[i]);
      for (size_t i = 0; i < x.size(); ++i) bad_streamed += !same(counted[i], streamed[i]);
      EXPECT_EQ(bad, 0) << name << " rounding " << int(r);
      EXPECT_EQ(bad_streamed, 0) << name << " rounding " << int(r) << ", streamed";
      EXPECT_EQ(c.values, x.size()) << name;
    }
}

// Large tensors run over threads in whole bands of tiles; the values are the one-thread values.
TEST(NumericsScaling, BlockScalingRoundsTheSameOnAnyNumberOfThreads) {
  std::mt19937 gen(17);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const size_t rows = 600, cols = 512;  // 300K values: enough for three threads
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = n(gen) * std::exp2(float(int(i / 128) % 20 - 10));
  for (const char* recipe : {"block:1x128", "block:128x128", "block:3x64:pow2"})
    for (auto r : {tb::num::Rounding::kNearestEven, tb::num::Rounding::kStochastic}) {
      const Format f = parse_format("fp:e=4,m=3,special=fn,overflow=sat");
      const Scaling s = parse_scaling(recipe, f, "e4m3");
      QuantOptions o;
      o.rounding = r;
      o.seed = 5;
      o.offset = 1000;
      std::vector<float> one(x.size()), three(x.size());
      o.threads = 1;
      tb::num::quantize_block_scaled(f, s, x.data(), one.data(), x.size(), cols, o, nullptr);
      o.threads = 3;
      tb::num::quantize_block_scaled(f, s, x.data(), three.data(), x.size(), cols, o, nullptr);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += !same(one[i], three[i]);
      EXPECT_EQ(bad, 0) << recipe << " rounding " << int(r);
      // Not the unscaled rounding: the scales did something.
      const auto plain = tb::num::quantize(f, x, o);
      int differ = 0;
      for (size_t i = 0; i < x.size(); ++i) differ += !same(one[i], plain[i]);
      EXPECT_GT(differ, 0) << recipe;
    }
}

TEST(NumericsScaling, RecipesParseRoundTripAndRefuseBadOnes) {
  const Format f = parse_format("e4m3");
  for (const char* t : {"current", "current:3", "delayed:1024:max", "delayed:16:recent:2",
                        "block:1x128", "block:128x128:pow2"})
    EXPECT_EQ(parse_scaling(t, f, "e4m3").str(), t);
  EXPECT_EQ(parse_scaling("delayed", f, "e4m3").str(), "delayed:1024:max");
  EXPECT_EQ(parse_scaling("delayed:16", f, "e4m3").history, 16);
  for (const char* t : {"delayed:0", "delayed:16:avg", "delayed:x", "current:100", "block:3",
                        "block:0x16", "block:1x16:pow3", "block:1x5000", "static", ""})
    EXPECT_THROW(parse_scaling(t, f, "e4m3"), tb::UsageError) << t;
  EXPECT_THROW(parse_scaling("current", parse_format("mxfp8_e4m3"), "mxfp8_e4m3"), tb::UsageError);
  EXPECT_THROW(parse_scaling("delayed", parse_format("nvfp4"), "nvfp4"), tb::UsageError);
}

// --- MX scale calculation modes (torchao's ScaleCalculationMode) --------------------------------

// The scale exponent X of a block with largest magnitude `amax` (normal), as torchao defines
// each mode, written with frexp instead of bit fields.
int reference_mx_exponent(const std::string& mode, float amax, int emax, int mbits, float max) {
  int e;
  const double m = 2 * std::frexp(double(amax), &e);  // amax = m * 2^(e-1), m in [1, 2)
  const int fl = e - 1;
  int x = fl - emax;
  if (mode == "ceil") x = fl + (m != 1.0) - emax;
  // amax rounded to the element's mantissa bits (ties up) reaches 2 from 2 - 2^-(mbits+1).
  if (mode == "even") x = fl + (m >= 2.0 - std::ldexp(1.0, -(mbits + 1))) - emax;
  if (mode == "rceil") {
    const float d = amax * float(1.0 / max);  // float32, as the hardware computes it
    int de;
    const double dm = 2 * std::frexp(double(d), &de);
    x = (de - 1) + (dm != 1.0);
  }
  return std::min(std::max(x, -127), 127);
}

TEST(NumericsScaling, MxScaleModesMatchTorchao) {
  struct Elem {
    const char* name;
    int emax, mbits;
    float max;
    int man, emin;
  };
  const Elem elems[] = {{"e4m3", 8, 3, 448, 3, -6}, {"e2m1", 2, 1, 6, 1, 0}};
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Elem& el : elems)
    for (const char* mode : {"floor", "ceil", "even", "rceil"}) {
      const Format f = parse_format(std::string("mx:elem=") + el.name + ",block=16,scale=" + mode);
      EXPECT_EQ(parse_format(f.str()), f);
      std::vector<float> x(16 * 200);
      for (size_t b = 0; b < 200; ++b) {
        const float mag = std::ldexp(1.0f, int(b % 40) - 20);
        for (size_t i = 0; i < 16; ++i) x[b * 16 + i] = u(gen) * mag;
        // Edge amaxes: a power of two, just above one, and just below the rounding points.
        if (b % 4 == 1) x[b * 16 + 3] = mag;
        if (b % 4 == 2) x[b * 16 + 3] = std::nextafter(mag, 2 * mag);
        if (b % 4 == 3) x[b * 16 + 3] = mag * (2.0f - std::ldexp(1.0f, -(el.mbits + 1)));
      }
      QuantOptions o;
      o.row = x.size();
      const auto y = tb::num::quantize(f, x, o);
      int bad_exp = 0, bad_val = 0;
      for (size_t b = 0; b < 200; ++b) {
        float amax = 0;
        for (size_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[b * 16 + i]));
        const int want = reference_mx_exponent(mode, amax, el.emax, el.mbits, el.max);
        bad_exp += tb::num::block_exponent(f.blk, x.data() + b * 16, 16) - 127 != want;
        for (size_t i = 0; i < 16; ++i) {
          const float v = x[b * 16 + i];
          const float q = float(
              std::ldexp(round_sat(std::ldexp(double(v), -want), el.man, el.emin, el.max), want));
          bad_val += !same(y[b * 16 + i], q);
        }
      }
      EXPECT_EQ(bad_exp, 0) << el.name << " " << mode;
      EXPECT_EQ(bad_val, 0) << el.name << " " << mode;
    }
  EXPECT_THROW(parse_format("mx:elem=e4m3,scale=up"), tb::UsageError);
  EXPECT_THROW(parse_format("mx:elem=int8,scale=ceil"), tb::UsageError);
}

// --- NVFP4 --------------------------------------------------------------------------------------

// Transformer Engine's NVFP4 (common/cast/nvfp4/core_nvfp4.cuh), in its float32 order.
std::vector<float> reference_nvfp4(const std::vector<float>& x, size_t cols, size_t tile_rows,
                                   Rounding mode = Rounding::kNearestEven) {
  float tamax = 0;
  for (float v : x) tamax = std::fmax(tamax, std::fabs(v));
  float s_enc = std::fmin(448.0f * 6.0f / tamax, kFltMax);
  if (tamax == 0 || s_enc == 0) s_enc = 1;
  const float s_dec = 1.0f / s_enc;
  const size_t rows = x.size() / cols;
  std::vector<float> y(x.size());
  for (size_t r0 = 0; r0 < rows; r0 += tile_rows)
    for (size_t c0 = 0; c0 < cols; c0 += 16) {
      float a = 0;
      for (size_t r = r0; r < std::min(rows, r0 + tile_rows); ++r)
        for (size_t c = c0; c < std::min(cols, c0 + 16); ++c)
          a = std::fmax(a, std::fabs(x[r * cols + c]));
      const float sb = e4m3(a * (s_enc * (1.0f / 6.0f)));
      const float enc = std::fmin(1.0f / (sb * s_dec), kFltMax);
      for (size_t r = r0; r < std::min(rows, r0 + tile_rows); ++r)
        for (size_t c = c0; c < std::min(cols, c0 + 16); ++c)
          y[r * cols + c] = e2m1(x[r * cols + c] * enc, mode) * sb * s_dec;
    }
  return y;
}

// Elements of quantize(name) on rows of `row` that differ from reference_nvfp4; the output in
// *y where given.
int nvfp4_mismatches(const std::vector<float>& v, size_t row, const char* name,
                     std::vector<float>* y = nullptr) {
  const Format f = parse_format(name);
  QuantOptions o;
  o.row = row;
  const auto got = tb::num::quantize(f, v, o);
  const auto want = reference_nvfp4(v, row, size_t(f.blk.rows));
  int bad = 0;
  for (size_t i = 0; i < v.size(); ++i) bad += !same(got[i], want[i]);
  if (y) *y = got;
  return bad;
}

// quantize(nvfp4) of rows of `row`, stochastically from stream position (seed, offset).
std::vector<float> nvfp4_stochastic(const std::vector<float>& v, size_t row, uint64_t seed,
                                    uint64_t offset) {
  QuantOptions o;
  o.row = row;
  o.rounding = tb::num::Rounding::kStochastic;
  o.seed = seed;
  o.offset = offset;
  return tb::num::quantize(parse_format("nvfp4"), v, o);
}

// A tile of len elements (amax a) rounded stochastically as NVFP4 should: scaled by its encode
// scale, then E2M1's own stochastic quantizer at stream positions (seed, offset + index), then
// scaled back.
std::vector<float> nvfp4_sr_tile(const float* x, size_t len, float a, float s_enc, uint64_t seed,
                                 uint64_t offset) {
  const float s_dec = 1.0f / s_enc;
  const float sb = e4m3(a * (s_enc * (1.0f / 6.0f)));
  const float enc = std::fmin(1.0f / (sb * s_dec), kFltMax);
  std::vector<float> scaled(len);
  for (size_t c = 0; c < len; ++c) scaled[c] = x[c] * enc;
  Format elem = parse_format("e2m1");
  elem.fp.overflow = tb::num::Overflow::kSaturate;
  QuantOptions eo;
  eo.rounding = tb::num::Rounding::kStochastic;
  eo.seed = seed;
  eo.offset = offset;
  auto q = tb::num::quantize(elem, scaled, eo);
  for (float& v : q) v = v * sb * s_dec;
  return q;
}

// NVFP4's elements rounded ties away or toward zero (the AVX-512 tiles on rows of whole
// tiles, the general loop on rows that end inside one), against the same definition.
TEST(NumericsScaling, Nvfp4DirectedRoundingMatchesItsDefinition) {
  std::mt19937 gen(19);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const size_t cols : {size_t(64), size_t(567)}) {
    std::vector<float> x(40 * cols);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = n(gen) * std::exp2(float(int((i % cols) / 16 * 5 + i / cols) % 23 - 11));
    for (const Rounding r : {Rounding::kTiesAway, Rounding::kTowardZero})
      for (const char* name : {"nvfp4", "nvfp4_2d"}) {
        const Format f = parse_format(name);
        QuantOptions o;
        o.row = cols;
        o.rounding = r;
        const auto y = tb::num::quantize(f, x, o);
        const auto want = reference_nvfp4(x, cols, size_t(f.blk.rows), r);
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += !same(y[i], want[i]);
        EXPECT_EQ(bad, 0) << name << " " << tb::num::rounding_name(r) << " rows of " << cols;
      }
  }
}

// E2M1's ties themselves, which random inputs all but never hit: tiles whose amax is 6 in a
// tensor whose amax is 448 x 6 have encode and decode scales of exactly 1 (s_enc = 1, each
// tile's E4M3 scale 1), so the elements are rounded as given. Ties away from zero go up in
// magnitude, toward zero down, to nearest even to the even mantissa (0, 1, 2, 4 of the values
// around them); their neighbours one ulp either side go to the nearer value.
TEST(NumericsScaling, Nvfp4RoundingOfExactTies) {
  // Each tie of the grid with the grid values above and below it.
  const std::vector<std::array<float, 3>> ties = {
      {0.25f, 0.5f, 0.0f}, {0.75f, 1.0f, 0.5f}, {1.25f, 1.5f, 1.0f}, {1.75f, 2.0f, 1.5f},
      {2.5f, 3.0f, 2.0f},  {3.5f, 4.0f, 3.0f},  {5.0f, 6.0f, 4.0f}};
  const size_t cols = 64;
  std::vector<float> x;
  std::vector<float> away, zero, even;  // what each element must become
  const auto push = [&](float v, float a, float z, float e) {
    x.push_back(v);
    away.push_back(a);
    zero.push_back(z);
    even.push_back(e);
  };
  // E2M1's even values: 0, 1, 2 and 4 (mantissa bit 0); 0.5, 1.5, 3 and 6 are odd.
  const auto is_even = [](float v) { return v == 0 || v == 1 || v == 2 || v == 4; };
  for (const float sign : {1.0f, -1.0f})
    for (const auto& [tie, up, down] : ties) {
      const float to_even = sign * (is_even(up) ? up : down);
      push(sign * 6.0f, sign * 6.0f, sign * 6.0f, sign * 6.0f);  // the tile's amax
      push(sign * tie, sign * up, sign * down, to_even);
      push(sign * std::nextafter(tie, 10.0f), sign * up, sign * down, sign * up);
      push(sign * std::nextafter(tie, 0.0f), sign * down, sign * down, sign * down);
      for (int i = 0; i < 12; ++i) push(sign * tie, sign * up, sign * down, to_even);
    }
  // Then a row of its own whose last tile holds the tensor's amax (its own scale).
  while (x.size() % cols) push(0.0f, 0.0f, 0.0f, 0.0f);
  for (size_t i = 0; i < cols; ++i) push(0.0f, 0.0f, 0.0f, 0.0f);
  x.back() = 448.0f * 6.0f;
  for (const Rounding r : {Rounding::kTiesAway, Rounding::kTowardZero, Rounding::kNearestEven})
    for (const size_t threads : {size_t(1), size_t(2)}) {
      QuantOptions o;
      o.row = cols;
      o.rounding = r;
      o.threads = int(threads);
      const auto y = tb::num::quantize(parse_format("nvfp4"), x, o);
      const auto ref = reference_nvfp4(x, cols, 1, r);
      const auto& want = r == Rounding::kTiesAway ? away : r == Rounding::kTowardZero ? zero : even;
      int bad = 0, bad_ref = 0;
      for (size_t i = 0; i + cols < x.size(); ++i) {  // the last row holds the large element
        bad += !same(y[i], want[i]);
        bad_ref += !same(y[i], ref[i]);
      }
      EXPECT_EQ(bad, 0) << tb::num::rounding_name(r);
      EXPECT_EQ(bad_ref, 0) << tb::num::rounding_name(r);
    }
}

TEST(NumericsScaling, Nvfp4MatchesTransformerEngine) {
  std::mt19937 gen(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const size_t rows = 48, cols = 64;
  std::vector<float> x(rows * cols);
  // Rows of very different magnitudes: blocks whose scale is far below the tensor's.
  for (size_t i = 0; i < x.size(); ++i) x[i] = n(gen) * std::exp2(float(int(i / cols) % 24 - 16));
  for (const char* name : {"nvfp4", "nvfp4_2d"}) {
    const Format f = parse_format(name);
    EXPECT_EQ(parse_format(f.str()), f) << f.str();
    const auto want = reference_nvfp4(x, cols, size_t(f.blk.rows));
    for (int threads : {1, 3}) {
      QuantOptions o;
      o.row = cols;
      o.threads = threads;
      o.stream_above = 1024;  // the streamed path too
      const auto y = tb::num::quantize(f, x, o);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += !same(y[i], want[i]);
      EXPECT_EQ(bad, 0) << name << " threads " << threads;
    }
  }
  // Rows of 567 = 2 x 256 + 3 x 16 + 7: the tiles' amaxes 16 tiles at a time, then one at a
  // time, then a short tile; every tile its own magnitude (a tile's amax in the wrong lane
  // would show) and NaNs (ignored by the amax).
  {
    const size_t r3 = 34, c3 = 567;
    std::vector<float> v(r3 * c3);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = n(gen) * std::exp2(float(int((i % c3) / 16 * 7 + i / c3) % 29 - 14));
    v[3 * c3 + 40] = std::numeric_limits<float>::quiet_NaN();
    v[20 * c3 + 300] = std::numeric_limits<float>::quiet_NaN();
    for (const char* name : {"nvfp4", "nvfp4_2d"})
      EXPECT_EQ(nvfp4_mismatches(v, c3, name), 0) << name << " on rows of " << c3;
  }
  // 1-D tiles on rows of 1024 run as 4096-element rows, so 10 rows end in a short one of 2048:
  // its own groups of 16 tiles, a NaN in it and one in a whole row.
  {
    const size_t r4 = 10, c4 = 1024;
    std::vector<float> v(r4 * c4);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = n(gen) * std::exp2(float(int(i / 16 * 5) % 23 - 11));
    v[100] = std::numeric_limits<float>::quiet_NaN();
    v[9000] = -std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(nvfp4_mismatches(v, c4, "nvfp4"), 0) << "nvfp4 on rows of " << c4;
  }
  // Inf in a tile: the tensor's scale is 1 (its amax is Inf), the tile's E4M3 scale saturates
  // at 448, and the element saturates at 6 x 448 with its sign (the rounding assumes no NaN
  // where the call holds none; Inf must still saturate).
  {
    const size_t c6 = 64;
    std::vector<float> v(32 * c6);
    for (size_t i = 0; i < v.size(); ++i) v[i] = n(gen) * std::exp2(float(int(i / 16) % 9 - 4));
    v[70] = std::numeric_limits<float>::infinity();
    v[1500] = -std::numeric_limits<float>::infinity();
    for (const char* name : {"nvfp4", "nvfp4_2d"}) {
      std::vector<float> y;
      EXPECT_EQ(nvfp4_mismatches(v, c6, name, &y), 0) << name << " with Inf";
      EXPECT_EQ(y[70], 6.0f * 448.0f) << name;
      EXPECT_EQ(y[1500], -6.0f * 448.0f) << name;
    }
  }
  // 16 x 16 tiles over a call that ends inside a row (17 rows of 567 and 300 more): the last
  // band's whole row and its short row folded together, a NaN in the short row.
  {
    const size_t c5 = 567, m5 = 17 * c5 + 300;
    std::vector<float> v(m5);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = n(gen) * std::exp2(float(int((i % c5) / 16 * 3 + i / c5) % 19 - 9));
    v[17 * c5 + 260] = std::numeric_limits<float>::quiet_NaN();
    const Format f = parse_format("nvfp4_2d");
    QuantOptions o;
    o.row = c5;
    const auto y = tb::num::quantize(f, v, o);
    std::vector<float> padded(v);
    padded.resize(18 * c5, 0.0f);  // zeros change no tile's amax
    const auto want = reference_nvfp4(padded, c5, 16);
    int bad = 0;
    for (size_t i = 0; i < v.size(); ++i) bad += !same(y[i], want[i]);
    EXPECT_EQ(bad, 0) << "nvfp4_2d over " << m5 << " values in rows of " << c5;
  }
  // Rows that end inside a tile (40 = 2 x 16 + 8), 1-D and with 16 x 16 tiles whose last band
  // is short (20 = 16 + 4 rows).
  {
    const size_t r2 = 20, c2 = 40;
    std::vector<float> v(r2 * c2);
    for (size_t i = 0; i < v.size(); ++i) v[i] = n(gen) * std::exp2(float(int(i / 7) % 12 - 6));
    for (const char* name : {"nvfp4", "nvfp4_2d"})
      EXPECT_EQ(nvfp4_mismatches(v, c2, name), 0) << name << " on rows of " << c2;
  }
  // A call that ends inside a row (n not a multiple of the row): the short row's tiles end
  // with it, as a tensor of that many values would round them.
  {
    const size_t m = 3 * cols + 20;
    const std::vector<float> part(x.begin(), x.begin() + long(m));
    QuantOptions o;
    o.row = cols;
    const auto y = tb::num::quantize(parse_format("nvfp4"), part, o);
    std::vector<float> padded(part);
    padded.resize(4 * cols, 0.0f);  // zeros change no tile's amax
    const auto want = reference_nvfp4(padded, cols, 1);
    int bad = 0;
    for (size_t i = 0; i < m; ++i) bad += !same(y[i], want[i]);
    EXPECT_EQ(bad, 0);
  }
  // Stochastic rounding: averaged over seeds, the values come far closer to the input than
  // round-to-nearest does (which would fail this).
  {
    const std::vector<float> v(x.begin(), x.begin() + long(4 * cols));
    const auto nearest = reference_nvfp4(v, cols, 1);
    std::vector<double> sum(v.size(), 0.0);
    const int seeds = 400;
    for (int k = 0; k < seeds; ++k) {
      QuantOptions o;
      o.row = cols;
      o.rounding = tb::num::Rounding::kStochastic;
      o.seed = uint64_t(k);
      const auto y = tb::num::quantize(parse_format("nvfp4"), v, o);
      for (size_t i = 0; i < v.size(); ++i) sum[i] += y[i];
    }
    double err = 0, scale = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      err += std::fabs(sum[i] / seeds - v[i]);
      scale += std::fabs(v[i] - nearest[i]) + std::fabs(v[i]) * 0.01;
    }
    EXPECT_LT(err, 0.5 * scale);  // far closer than round-to-nearest's own error
  }
  // Stochastic rounding draws the bits E2M1's own stochastic quantizer draws for the scaled
  // values at the same stream positions (seed, offset + index), bit for bit: rows well inside
  // a 2^32 stretch of the index and one that crosses it.
  for (const uint64_t offset : {uint64_t(0), (uint64_t(7) << 32) - 100}) {
    const size_t r3 = 4;
    const std::vector<float> v(x.begin(), x.begin() + long(r3 * cols));
    const auto y = nvfp4_stochastic(v, cols, 99, offset);
    float tamax = 0;
    for (float a : v) tamax = std::fmax(tamax, std::fabs(a));
    const float s_enc = std::fmin(448.0f * 6.0f / tamax, kFltMax);
    int bad = 0;
    for (size_t r = 0; r < r3; ++r)
      for (size_t c0 = 0; c0 < cols; c0 += 16) {
        float a = 0;
        for (size_t c = c0; c < c0 + 16; ++c) a = std::fmax(a, std::fabs(v[r * cols + c]));
        const auto want =
            nvfp4_sr_tile(&v[r * cols + c0], 16, a, s_enc, 99, offset + r * cols + c0);
        for (size_t c = 0; c < 16; ++c) bad += !same(y[r * cols + c0 + c], want[c]);
      }
    EXPECT_EQ(bad, 0) << "offset " << offset;
  }
  // Rows shorter than a tile (a 10-class output's logits: one tile each, every row at once): to
  // nearest even as Transformer Engine rounds them, stochastically with E2M1's own bits at the
  // same stream positions, the index crossing 2^32 too.
  for (const size_t c1 : {size_t(10), size_t(7)}) {
    const size_t r1 = 40;
    const std::vector<float> v(x.begin(), x.begin() + long(r1 * c1));
    EXPECT_EQ(nvfp4_mismatches(v, c1, "nvfp4"), 0) << "rows of " << c1;
    float tamax = 0;
    for (float a : v) tamax = std::fmax(tamax, std::fabs(a));
    const float s_enc = std::fmin(448.0f * 6.0f / tamax, kFltMax);
    for (const uint64_t offset : {uint64_t(0), (uint64_t(7) << 32) - 25}) {
      const auto y = nvfp4_stochastic(v, c1, 99, offset);
      int bad = 0;
      for (size_t r = 0; r < r1; ++r) {
        float a = 0;
        for (size_t c = 0; c < c1; ++c) a = std::fmax(a, std::fabs(v[r * c1 + c]));
        const auto want = nvfp4_sr_tile(&v[r * c1], c1, a, s_enc, 99, offset + r * c1);
        for (size_t c = 0; c < c1; ++c) bad += !same(y[r * c1 + c], want[c]);
      }
      EXPECT_EQ(bad, 0) << "rows of " << c1 << ", offset " << offset;
    }
  }
  // Stochastic rounding with a NaN in a row (the kernel's form that checks for one): the NaN
  // stays NaN, and every other element is what it is with a 0 there instead (amaxes ignore
  // NaN, and each element draws its own bits). Rows of 64 (one row of whole tiles, 16 at a
  // time) and of 567 (the NaN in a tile found one at a time), 1-D and 2-D tiles, the tensor's
  // amax found by the call or given (a band at a time).
  for (const size_t row : {cols, size_t(567)})
    for (const char* name : {"nvfp4", "nvfp4_2d"})
      for (const bool given : {false, true}) {
        const size_t at = row + (row == cols ? 5 : 560);
        std::vector<float> v(x.begin(), x.begin() + long(4 * row)), zero = v;
        v[at] = std::nanf("");
        zero[at] = 0.0f;
        QuantOptions o;
        o.row = row;
        o.rounding = tb::num::Rounding::kStochastic;
        o.seed = 5;
        if (given)
          for (float a : zero) o.tensor_amax = std::fmax(o.tensor_amax, std::fabs(a));
        const auto y = tb::num::quantize(parse_format(name), v, o);
        const auto y0 = tb::num::quantize(parse_format(name), zero, o);
        int bad = 0;
        for (size_t i = 0; i < v.size(); ++i)
          bad += i == at ? !std::isnan(y[i]) : !same(y[i], y0[i]);
        EXPECT_EQ(bad, 0) << name << " on rows of " << row << (given ? ", amax given" : "");
      }
  // A zero tensor stays zero; the tensor scale is then 1.
  const std::vector<float> z(64, 0.0f);
  for (float v : tb::num::quantize(parse_format("nvfp4"), z)) EXPECT_EQ(v, 0.0f);
  EXPECT_DOUBLE_EQ(parse_format("nvfp4").bits_per_element(), 4.5);
  EXPECT_DOUBLE_EQ(parse_format("nvfp4_2d").bits_per_element(), 4 + 8.0 / 256);
}

}  // namespace
