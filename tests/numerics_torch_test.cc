// The number-format library against LibTorch's own bfloat16 and half conversions, over every
// float32 bit pattern, and the tensor adapter (threads, autograd).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/errors.h"
#include "emulation/fused_update.h"
#include "emulation/torch_quant.h"
#include "numerics/quantize.h"
#include "numerics/scaling.h"
#include "numerics/update.h"

namespace {

using tb::num::parse_format;

// Patterns start, start + stride, ... below 2^32: how many of them the library rounds
// differently from LibTorch's conversion to `type` and back. NaN matches any NaN (LibTorch
// itself returns different NaN payloads for bfloat16 and half).
int64_t mismatches(const tb::num::Format& f, at::ScalarType type, uint64_t stride,
                   uint32_t* first_bad) {
  const int64_t chunk = int64_t(1) << 24;
  const uint64_t total = ((uint64_t(1) << 32) + stride - 1) / stride;
  std::vector<uint32_t> pat(chunk);
  std::vector<float> mine(chunk);
  int64_t bad = 0;
  for (uint64_t first = 0; first < total; first += chunk) {
    const int64_t n = int64_t(std::min<uint64_t>(chunk, total - first));
    at::parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) pat[i] = uint32_t((first + uint64_t(i)) * stride);
    });
    const auto t = torch::from_blob(pat.data(), {n}, torch::kFloat);
    const auto ref = t.to(type).to(torch::kFloat).contiguous();
    tb::num::QuantOptions o;
    o.threads = 0;
    tb::num::quantize(f, reinterpret_cast<const float*>(pat.data()), mine.data(), size_t(n), o);
    const uint32_t* r = reinterpret_cast<const uint32_t*>(ref.data_ptr<float>());
    const uint32_t* m = reinterpret_cast<const uint32_t*>(mine.data());
    std::atomic<int64_t> count{0};
    at::parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
      int64_t c = 0;
      for (int64_t i = b; i < e; ++i) {
        const bool both_nan =
            (r[i] & 0x7FFFFFFFu) > 0x7F800000u && (m[i] & 0x7FFFFFFFu) > 0x7F800000u;
        c += (r[i] != m[i]) & !both_nan;
      }
      count += c;
    });
    if (count && !bad) {
      for (int64_t i = 0; i < n; ++i)
        if (r[i] != m[i] && !((r[i] & 0x7FFFFFFFu) > 0x7F800000u)) {
          *first_bad = pat[i];
          break;
        }
    }
    bad += count;
  }
  return bad;
}

// Every float32 pattern when TB_EXHAUSTIVE=1 (about 100 s for both formats on 2 busy cores);
// otherwise every 7th pattern (a stride prime to every power of two, so every low-bit
// combination and every exponent is still covered many times, ties included).
uint64_t stride() {
  const char* e = std::getenv("TB_EXHAUSTIVE");
  return e && std::string(e) == "1" ? 1 : 7;
}

TEST(NumericsTorch, Bfloat16IsBitIdenticalToLibTorch) {
  uint32_t first = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mismatches(parse_format("bf16"), torch::kBFloat16, stride(), &first), 0)
      << "first: 0x" << std::hex << first;
  std::cout << "bf16: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  uint32_t f2 = 0;
  EXPECT_EQ(mismatches(parse_format("fp:e=8,m=7"), torch::kBFloat16, 65537, &f2), 0);
}

TEST(NumericsTorch, HalfIsBitIdenticalToLibTorch) {
  uint32_t first = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mismatches(parse_format("fp16"), torch::kHalf, stride(), &first), 0)
      << "first: 0x" << std::hex << first;
  std::cout << "fp16: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

// A stride of 7 misses six sevenths of the patterns; every tie and its neighbours are checked
// here whatever the stride: for each upper half (sign, exponent, top of the mantissa) the low
// bits at and around the rounding point of each format.
TEST(NumericsTorch, EveryTieAndNeighbourMatchesLibTorch) {
  for (const auto& [name, type, drop] :
       {std::make_tuple("bf16", torch::kBFloat16, 16), std::make_tuple("fp16", torch::kHalf, 13)}) {
    std::vector<uint32_t> pats;
    const uint32_t half = 1u << (drop - 1), low = (1u << drop) - 1;
    for (uint64_t hi = 0; hi < (uint64_t(1) << (32 - drop)); ++hi)
      for (uint32_t lo : {0u, 1u, half - 1, half, half + 1, low})
        pats.push_back(uint32_t(hi << drop) | lo);
    // fp16's subnormals drop more bits: ties at every shift there.
    for (uint32_t e = 100; e <= 113; ++e)
      for (uint32_t sh = 13; sh < 24; ++sh)
        for (uint32_t m = 0; m < 64; ++m)
          for (uint32_t d : {0u, 1u, 2u}) {
            const uint32_t t = (m << sh) | (1u << (sh - 1));
            pats.push_back((e << 23) | ((t + d - 1) & 0x7FFFFFu));
          }
    const auto t = torch::from_blob(pats.data(), {int64_t(pats.size())}, torch::kFloat);
    const auto ref = t.to(type).to(torch::kFloat).contiguous();
    std::vector<float> mine(pats.size());
    tb::num::quantize(parse_format(name), reinterpret_cast<const float*>(pats.data()), mine.data(),
                      pats.size(), {});
    int64_t bad = 0;
    for (size_t i = 0; i < pats.size(); ++i) {
      uint32_t m;
      std::memcpy(&m, &mine[i], 4);
      const float r = ref.data_ptr<float>()[i];
      uint32_t rb;
      std::memcpy(&rb, &r, 4);
      if (rb != m && !(std::isnan(r) && std::isnan(mine[i]))) {
        if (++bad < 4) ADD_FAILURE() << name << " 0x" << std::hex << pats[i];
      }
    }
    EXPECT_EQ(bad, 0) << name << " of " << pats.size();
  }
}

TEST(NumericsTorch, TensorAdapterMatchesTheLibraryAndKeepsBlocksInRows) {
  torch::manual_seed(0);
  const auto x = torch::randn({37, 100}) * 10;
  const auto f = parse_format("mxfp6_e2m3");
  tb::num::QuantOptions o;
  o.row = 100;
  const auto want = tb::num::quantize(
      f, std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel()), o);
  const auto got = tb::emu::quantize_tensor(x, f, o);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.data_ptr<float>()));
  // Stochastic: the same point seeded the same way gives the same sequence of tensors.
  tb::emu::QuantPoint a = tb::emu::QuantPoint::parse("e4m3/stochastic", 5);
  tb::emu::QuantPoint b = tb::emu::QuantPoint::parse("e4m3/stochastic", 5);
  const auto a1 = a.apply(x), a2 = a.apply(x);
  EXPECT_TRUE(torch::equal(a1, b.apply(x)));
  EXPECT_TRUE(torch::equal(a2, b.apply(x)));
  EXPECT_FALSE(torch::equal(a1, a2));
  EXPECT_EQ(a.str(), "e4m3/stochastic");
  EXPECT_FALSE(tb::emu::QuantPoint::parse("off").enabled());
}

// Per-tensor current scaling (Transformer Engine's Float8CurrentScaling) against a reference
// written here from its definition: scale = 448 / amax / 2^M in float32, e4m3 rounded to
// nearest even (written out below, not the library's code), times the float32 1 / scale.
// What `trainbench quantize --format F@R` prints as the value kept (num::scale_row) is what a
// point `F@R` keeps for a tensor of one row of those values: current and block recipes, float
// and fixed-point formats, the deterministic roundings, with NaN, Inf, zeros, subnormals, and
// a row shorter than the block (one tile).
TEST(NumericsTorch, ScaleRowKeepsWhatThePointKeeps) {
  std::vector<float> x = {1000.0f, -3.5f,  0.01f, 1e-4f,  2e-3f, -7.0f, 0.0f, 65.0f,
                          -0.0f,   1e-39f, 3e4f,  -0.25f, 5.0f,  6.0f,  7.0f, 8.0f};
  std::vector<float> specials = x;
  specials[3] = std::numeric_limits<float>::quiet_NaN();
  specials[9] = -std::numeric_limits<float>::infinity();
  for (const auto* row : {&x, &specials})
    for (const char* fmt : {"e4m3", "e5m2", "bf16", "fixed:w=8,f=4"})
      for (const char* recipe :
           {"current", "current:3", "block:1x4", "block:1x8:pow2", "block:1x32"})
        for (const char* rounding : {"", "/ties-away", "/toward-zero"}) {
          const std::string point = std::string(fmt) + rounding + "@" + recipe;
          const auto q = tb::emu::QuantPoint::parse(point, 1);
          tb::num::QuantOptions o;
          o.rounding = q.rounding();
          const tb::num::Scaling s = tb::num::parse_scaling(recipe, parse_format(fmt), fmt);
          const auto shown = tb::num::scale_row(q.format(), s, *row, o);
          const torch::Tensor t = torch::from_blob(const_cast<float*>(row->data()),
                                                   {1, int64_t(row->size())}, torch::kFloat)
                                      .clone();
          const torch::Tensor kept = q.apply(t).contiguous();
          int bad = 0;
          for (size_t i = 0; i < row->size(); ++i) {
            const float a = shown.out[i], b = kept.data_ptr<float>()[i];
            bad += std::memcmp(&a, &b, 4) != 0 && !(std::isnan(a) && std::isnan(b));
          }
          EXPECT_EQ(bad, 0) << point << (row == &specials ? " with NaN and Inf" : "");
        }
}

TEST(NumericsTorch, CurrentScalingMatchesItsDefinitionAndKeepsOutOfRangeValues) {
  // e4m3 (fn): 3 mantissa bits, normals from 2^-6, subnormals down to 2^-9, max 448.
  auto e4m3 = [](double v) {
    if (v == 0) return 0.0;
    const int e = std::max(-6, int(std::floor(std::log2(std::fabs(v)))));
    const double quantum = std::ldexp(1.0, e - 3);
    return std::nearbyint(v / quantum) * quantum;  // the default mode: ties to even
  };
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({64, 33}) * 1000;  // far beyond e4m3's 448
  x[0][0] = 3000.0f;
  x[5][7] = -2999.0f;
  const float* xs = x.data_ptr<float>();
  float amax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(xs[i]));
  for (int margin : {0, 2}) {
    const auto q = tb::emu::QuantPoint::parse(margin ? "e4m3@current:2" : "e4m3@current");
    ASSERT_TRUE(q.current_scaling());
    EXPECT_EQ(q.margin(), margin);
    EXPECT_EQ(q.str(), margin ? "e4m3@current:2" : "e4m3@current");
    const float scale = 448.0f / amax / float(1 << margin);
    EXPECT_EQ(q.scale_for(x), scale);
    const float inv = 1.0f / scale;
    const torch::Tensor y = q.apply(x);
    const float* ys = y.data_ptr<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float want = float(e4m3(double(xs[i] * scale))) * inv;
      bad += std::memcmp(&want, &ys[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(bad, 0) << "margin " << margin;
  }
  // Unscaled, 3000 is out of e4m3's range; scaled, it keeps e4m3's 3-bit precision.
  const auto plain = tb::emu::QuantPoint::parse("e4m3").apply(x);
  const auto scaled = tb::emu::QuantPoint::parse("e4m3@current").apply(x);
  EXPECT_FALSE(std::fabs(plain[0][0].item<float>() - 3000.0f) < 100) << plain[0][0].item<float>();
  EXPECT_NEAR(scaled[0][0].item<float>(), 3000.0f, 3000.0f / 16);
  EXPECT_NEAR(scaled[5][7].item<float>(), -2999.0f, 3000.0f / 16);
  // An all-zero tensor keeps scale 1; block formats and unknown scalings are refused.
  EXPECT_EQ(tb::emu::QuantPoint::parse("e4m3@current").scale_for(torch::zeros({4})), 1.0f);
  EXPECT_THROW(tb::emu::QuantPoint::parse("mxfp8_e4m3@current"), tb::UsageError);
  EXPECT_THROW(tb::emu::QuantPoint::parse("e4m3@delayed:0"), tb::UsageError);
  EXPECT_THROW(tb::emu::QuantPoint::parse("e4m3@current:x"), tb::UsageError);
}

// Delayed scaling through a point: each call of a step is a site with its own history (the
// scale a step uses comes from earlier steps' amaxes, num::AmaxHistory), evaluation uses the
// scales without recording, and a copy of the point (one per training run) starts from its
// own state.
TEST(NumericsTorch, DelayedScalingKeepsAHistoryPerSite) {
  const auto q = tb::emu::QuantPoint::parse("e4m3@delayed:4:max");
  ASSERT_EQ(q.scaling().kind, tb::num::Scaling::Kind::kDelayed);
  EXPECT_FALSE(q.counting());
  q.set_counting(true);
  std::vector<tb::num::AmaxHistory> want(2, tb::num::AmaxHistory(4));
  const tb::num::Format sat = tb::num::parse_format("fp:e=4,m=3,special=fn,overflow=sat");
  torch::manual_seed(2);
  for (int step = 0; step < 8; ++step) {
    q.begin_step();
    for (auto& h : want)
      if (step > 0) h.end_step(448.0f, 0, false);
    // Site 0 grows, site 1 shrinks: their scales must not mix.
    const torch::Tensor xs[2] = {torch::randn({8, 16}) * float(1 << step),
                                 torch::randn({8, 16}) / float(1 << step)};
    for (int site = 0; site < 2; ++site) {
      const torch::Tensor y = q.apply(xs[site]);
      const float scale = want[size_t(site)].scale();
      const torch::Tensor expect =
          tb::emu::quantize_tensor(xs[site] * scale, sat, {}) * (1.0f / scale);
      EXPECT_TRUE(torch::equal(y, expect)) << "step " << step << " site " << site;
      want[size_t(site)].record(xs[site].abs().max().item<float>());
    }
    // An evaluation between steps: the same scales, nothing recorded.
    q.set_recording(false);
    const torch::Tensor big = torch::full({4}, 1e6f);
    const tb::emu::QuantPoint copy = q;
    EXPECT_TRUE(torch::equal(q.apply(big), copy.apply(big)));
    q.set_recording(true);
  }
  // Training's calls are counted, the evaluations' are not: 8 steps of 2 x 128 values, and a
  // last step's 4 values far beyond the range site 0's history set.
  q.begin_step();
  q.apply(torch::full({4}, 1e6f));
  const auto stats = q.take_stats();
  EXPECT_EQ(stats.sites, 2);
  EXPECT_EQ(stats.counts.values, 16u * 128u + 4u);
  EXPECT_GE(stats.counts.overflow, 4u);
  EXPECT_GT(stats.scale_max, stats.scale_min);
  EXPECT_TRUE(q.take_stats().empty());
  EXPECT_EQ(q.str(), "e4m3@delayed:4:max");
}

// Every point counts on a counted step, whichever path rounds it: the in-place roundings (weight
// gradients, optimizer state, master weights; their fast paths and the fused update count
// nothing) go through whole tensors then, with the same bits; block formats count flushed
// values and NaN/Inf but no overflow (each block has its own range).
TEST(NumericsTorch, CountedStepsCountEveryPathWithTheSameBits) {
  using tb::emu::QuantPoint;
  torch::manual_seed(9);
  torch::Tensor x = torch::randn({64, 256}) * 1e-3;
  x.index_put_({0, 0}, 1e6f);  // beyond e4m3's and e5m2's range
  // Bit patterns: e4m3 makes a NaN of 1e6, which torch::equal finds unequal to itself.
  const auto same_bits = [](const torch::Tensor& a, const torch::Tensor& b) {
    return torch::equal(a.view(torch::kInt32), b.view(torch::kInt32));
  };
  for (const std::string point : {"e4m3", "e5m2/stochastic", "nvfp4", "mxfp8_e4m3"}) {
    const bool block = point == "nvfp4" || point == "mxfp8_e4m3";
    // The same seed: the counted point's calls draw what the plain one's draw.
    const QuantPoint counted = QuantPoint::parse(point, 1), plain = QuantPoint::parse(point, 1);
    counted.set_counting(true);
    // A weight gradient under a loss scale of 4: rounded, then divided.
    torch::Tensor a = x.clone(), b = x.clone();
    ASSERT_TRUE(counted.round_unscale_(a, 4, false));
    ASSERT_TRUE(plain.round_unscale_(b, 4, false));
    EXPECT_TRUE(same_bits(a, b)) << point;
    // The optimizer state's and master weights' rounding in place.
    torch::Tensor c = x.clone(), d = x.clone();
    counted.apply_(c);
    plain.apply_(d);
    EXPECT_TRUE(same_bits(c, d)) << point;
    EXPECT_FALSE(counted.rounds_in_chunks(x)) << point << ": a counted step rounds whole tensors";
    EXPECT_TRUE(plain.rounds_in_chunks(x)) << point;
    const auto st = counted.take_stats();
    EXPECT_EQ(st.counts.values, 2u * 64u * 256u) << point;
    // 1e-3-sized values next to 1e6: the blocks and tiles holding it flush the rest; the float
    // formats flush what lies below half their smallest subnormal.
    EXPECT_GT(st.counts.underflow, 0u) << point;
    EXPECT_EQ(st.overflow_counted, !block) << point;
    EXPECT_EQ(st.counts.overflow, block ? 0u : 2u) << point;
    EXPECT_TRUE(plain.take_stats().empty()) << point;
  }
}

// Outside the steps that count, delayed scaling takes each tensor's amax in the rounding pass
// (QuantOptions::input_amax): the same outputs and the same histories as the separate pass,
// on tensors split over threads and on ones holding Inf and NaN.
TEST(NumericsTorch, DelayedScalingsFusedAmaxMatchesTheSeparatePass) {
  const auto fused = tb::emu::QuantPoint::parse("e4m3@delayed:3:max");
  const auto separate = tb::emu::QuantPoint::parse("e4m3@delayed:3:max");
  separate.set_counting(true);
  ASSERT_FALSE(fused.counting());
  torch::manual_seed(3);
  for (int step = 0; step < 6; ++step) {
    fused.begin_step();
    separate.begin_step();
    torch::Tensor big = torch::randn({1100, 1024}) * float(1 << step);  // split over threads
    torch::Tensor odd = torch::randn({5, 7}) / float(1 << step);
    if (step == 2) odd[1][2] = std::numeric_limits<float>::infinity();
    if (step == 3) odd[0][0] = std::numeric_limits<float>::quiet_NaN();
    for (const torch::Tensor& x : {big, odd}) {
      const torch::Tensor a = fused.apply(x), b = separate.apply(x);
      EXPECT_TRUE(torch::equal(a.nan_to_num(), b.nan_to_num())) << "step " << step;
      EXPECT_TRUE(torch::equal(a.isnan(), b.isnan())) << "step " << step;
    }
  }
}

// NVFP4's tensor scale comes from the whole tensor, also when it is split over threads and
// chunks, and a weight gradient rounds to it like any tensor.
// Split over threads (over a million elements: the amax is taken first) or in one call (the
// amax from the tiles' own): either way the whole tensor's, as given explicitly.
TEST(NumericsTorch, Nvfp4UsesTheWholeTensorsAmax) {
  torch::manual_seed(4);
  for (const auto& shape : {std::vector<int64_t>{1100, 1024}, std::vector<int64_t>{64, 256},
                            std::vector<int64_t>{48, 784}}) {
    torch::Tensor x = torch::randn(shape);
    x[shape[0] - 1][5] = 500.0f;  // the tensor's amax, in the last chunk
    for (const char* name : {"nvfp4", "nvfp4_2d"}) {
      const auto f = tb::num::parse_format(name);
      tb::num::QuantOptions o;
      o.row = size_t(shape[1]);
      o.tensor_amax = 500.0f;
      const std::vector<float> want = tb::num::quantize(
          f, std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel()), o);
      const auto got = tb::emu::quantize_tensor(x, f, {});
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.data_ptr<float>()))
          << name << " " << shape[0];
      torch::Tensor g = x.clone();
      ASSERT_TRUE(tb::emu::QuantPoint::parse(name).round_unscale_(g, 2.0));
      EXPECT_TRUE(torch::equal(g, got / 2.0)) << name;
    }
  }
}

// round_unscale_'s finiteness: false where a value overflows (e5m2 rounds 1e6 to Inf) or was
// not finite, also where the format clips it to a finite value (NVFP4, fixed point, a scaled
// recipe), on the chunked path and the whole-tensor ones; without the check (no dynamic loss
// scaling) true, with the same values.
TEST(NumericsTorch, RoundUnscaleReportsOverflowOnlyWhereAsked) {
  for (const char* name : {"e5m2", "nvfp4", "e5m2@current", "fixed:w=8,f=4", "off"}) {
    torch::manual_seed(6);
    torch::Tensor g = torch::randn({300, 64});
    g[7][3] = std::strcmp(name, "e5m2") == 0 ? 1e6f : std::numeric_limits<float>::infinity();
    const auto point = tb::emu::QuantPoint::parse(name);
    torch::Tensor checked = g.clone(), unchecked = g.clone();
    EXPECT_FALSE(point.round_unscale_(checked, 4.0)) << name;
    EXPECT_TRUE(point.round_unscale_(unchecked, 4.0, false)) << name;
    EXPECT_TRUE(torch::equal(checked.isnan(), unchecked.isnan())) << name;
    EXPECT_TRUE(torch::equal(checked.nan_to_num(0), unchecked.nan_to_num(0))) << name;
  }
}

// A block format whose blocks do not divide a tensor's rows is refused where a recipe rounds a
// tensor (issue: exit 2 naming the item), as Transformer Engine and torchao refuse it; rows no
// longer than a block are one block; partial=on rounds the rows with short last blocks, as the
// library does.
TEST(NumericsTorch, BlocksThatDoNotDivideTheRowsAreRefusedUnlessPartial) {
  using tb::emu::QuantPoint;
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({4, 784});
  for (const char* name : {"mxfp8_e4m3", "bfp8", "nvfp4_2d"}) {
    const bool mx = std::string(name) == "mxfp8_e4m3";
    const torch::Tensor t = mx ? x : torch::randn({4, 792});  // 784 is 49 blocks of 16
    QuantPoint q = QuantPoint::parse(name);
    q.set_item(std::string("w:") + name);
    try {
      q.apply(t);
      ADD_FAILURE() << name << ": rounded a tensor its blocks do not fit";
    } catch (const tb::UsageError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind(std::string("'w:") + name + "': ", 0), 0u) << m;
      EXPECT_NE(m.find(mx ? "blocks of 32 do not divide the rows of 784 elements of a 4 x 784 "
                            "tensor"
                          : "blocks of 16 do not divide the rows of 792 elements of a 4 x 792 "
                            "tensor"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("(" + parse_format(name).str() + ",partial=on ends each row"),
                std::string::npos)
          << m;
    }
    // In place too, and the tensor is left as it was; the gradient's and the fused update's
    // roundings as well.
    torch::Tensor y = t.clone();
    EXPECT_THROW(q.apply_(y), tb::UsageError) << name;
    EXPECT_TRUE(torch::equal(y, t)) << name;
    EXPECT_THROW(q.round_unscale_(y, 1.0, false), tb::UsageError) << name;
    EXPECT_TRUE(torch::equal(y, t)) << name;
    EXPECT_THROW(q.chunk_rounding(y), tb::UsageError) << name;
  }
  // The bfp8 preset's blocks of 16 divide 784; MX's 32 divide 768; a row of 10 is one block.
  EXPECT_NO_THROW(QuantPoint::parse("bfp:block=16,m=7,e=8").apply(x));
  EXPECT_NO_THROW(QuantPoint::parse("mxfp8_e4m3").apply(torch::randn({4, 768})));
  EXPECT_NO_THROW(QuantPoint::parse("mxfp8_e4m3").apply(torch::randn({64, 10})));
  EXPECT_NO_THROW(QuantPoint::parse("nvfp4").apply(torch::randn({64, 10})));
  // partial=on: the library's rounding of rows of 784, the last block of each 16 long.
  const auto f = parse_format("mx:elem=e4m3,block=32,partial=on");
  EXPECT_TRUE(f.blk.partial);
  EXPECT_EQ(parse_format(f.str()), f);
  EXPECT_NE(f, parse_format("mxfp8_e4m3"));
  tb::num::QuantOptions o;
  o.row = 784;
  const std::vector<float> xs(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
  const auto want = tb::num::quantize(f, xs, o);
  const torch::Tensor got = QuantPoint::parse("mx:elem=e4m3,block=32,partial=on").apply(x);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.data_ptr<float>()));
}

// The weights' forward rounding is skipped where the masters, already rounded, would come
// through it unchanged: float grids, and MX floor-scaled float elements
// (NumericsFormat.MxFloorBlocksRoundedTwiceAreUnchanged), on trained-like weights here too.
TEST(NumericsTorch, SkippedWeightRoundingLeavesRoundedMastersUnchanged) {
  using tb::emu::QuantPoint;
  // Rows of 784 end in a short MX block (partial=on), rows of 768 do not.
  for (const char* name :
       {"e4m3", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4_e2m1", "fixed:w=8,f=4",
        "mx:elem=e4m3,block=32,partial=on", "mx:elem=e2m1,block=32,partial=on"}) {
    const QuantPoint w = QuantPoint::parse(name), m = QuantPoint::parse(name);
    ASSERT_TRUE(tb::emu::leaves_unchanged(w, m)) << name;
    torch::manual_seed(9);
    const bool mx = std::string(name).rfind("mx", 0) == 0, partial = std::strstr(name, "partial");
    torch::Tensor master = torch::randn({256, mx && !partial ? 768 : 784}) * 0.05;
    m.apply_(master);
    EXPECT_TRUE(torch::equal(w.apply(master), master)) << name;
  }
  const auto pair = [](const char* second, const char* first) {
    return tb::emu::leaves_unchanged(QuantPoint::parse(second), QuantPoint::parse(first));
  };
  EXPECT_FALSE(pair("mx:elem=e4m3,block=32,scale=ceil", "mx:elem=e4m3,block=32,scale=ceil"));
  EXPECT_FALSE(pair("mxint8", "mxint8"));  // -2 on the grid moves the shared exponent
  EXPECT_FALSE(pair("nvfp4", "nvfp4"));    // the tensor scale moves with the rounded amax
  EXPECT_FALSE(pair("bfp8", "bfp8"));
  EXPECT_FALSE(pair("mxfp8_e4m3", "mxfp8_e5m2"));
  EXPECT_FALSE(pair("mxfp8_e4m3", "off"));
  EXPECT_TRUE(pair("off", "mxfp8_e4m3"));
}

// Tensors large enough to be split over at::parallel_for's threads (over a million elements),
// and rounding in place (apply_, as optimizer state and master weights are): the same values,
// and for stochastic rounding the same draws, as one serial call of the library.
TEST(NumericsTorch, LargeTensorsAndInPlaceRoundingMatchTheLibrary) {
  torch::manual_seed(1);
  const auto x = torch::randn({1100, 1024}) * 10;
  const std::vector<float> xs(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
  for (const char* name : {"e5m2", "mxfp8_e4m3", "bfp8", "fixed:w=8,f=4"}) {
    for (const auto r : {tb::num::Rounding::kNearestEven, tb::num::Rounding::kStochastic}) {
      const auto f = parse_format(name);
      tb::num::QuantOptions o;
      o.rounding = r;
      o.seed = 77;
      o.row = 1024;
      const auto want = tb::num::quantize(f, xs, o);
      const auto got = tb::emu::quantize_tensor(x, f, o);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.data_ptr<float>())) << name;
    }
  }
  // apply_ rounds in place and draws the same stream as apply.
  tb::emu::QuantPoint a = tb::emu::QuantPoint::parse("e5m2/stochastic", 3);
  tb::emu::QuantPoint b = tb::emu::QuantPoint::parse("e5m2/stochastic", 3);
  torch::Tensor y = x.clone();
  const auto* storage = y.data_ptr<float>();
  const auto version = y._version();
  a.apply_(y);
  EXPECT_EQ(y.data_ptr<float>(), storage);
  EXPECT_GT(y._version(), version);  // autograd sees the in-place change
  EXPECT_TRUE(torch::equal(y, b.apply(x)));
  EXPECT_FALSE(torch::equal(y, x));
}

TEST(NumericsTorch, QuantizeOpRoundsForwardValueAndBackwardGradient) {
  const auto x = torch::tensor({1.1f, -3.3f, 500.0f}, torch::requires_grad());
  const auto fwd = tb::emu::QuantPoint::parse("fp:e=4,m=3,special=fn,overflow=sat");
  const auto bwd = tb::emu::QuantPoint::parse("e5m2");
  const auto y = tb::emu::quantize_op(x, fwd, bwd);
  EXPECT_TRUE(torch::equal(y.detach(), torch::tensor({1.125f, -3.25f, 448.0f})));
  (y * torch::tensor({0.3f, 1.0f, 70000.0f})).sum().backward();
  // The gradient is rounded to e5m2: 0.3 -> 0.3125, 70000 -> Inf (beyond 57344).
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({0.3125f, 1.0f, INFINITY})));
}

}  // namespace

namespace {

// The element arithmetic the fused optimizer step uses (numerics/update.h) is LibTorch's own,
// bit for bit, at every length (ATen's vector loops and their scalar remainders).
TEST(NumericsTorch, UpdateArithmeticIsLibTorchs) {
  torch::manual_seed(21);
  for (const int64_t n : {1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 4097, 70001}) {
    const torch::Tensor p = torch::randn({n}), v = torch::randn({n}) * 1e-3;
    torch::Tensor g = torch::randn({n}) * 1e-2;
    const double momentum = 0.9, lr = 0.0123;
    torch::Tensor want = v.clone(), got = v.clone();
    want.mul_(momentum).add_(g, 1 - 0.0);
    tb::num::momentum_buffer(got.data_ptr<float>(), g.data_ptr<float>(), size_t(n),
                             float(momentum));
    EXPECT_TRUE(torch::equal(want, got)) << "momentum buffer, n=" << n;
    want = p.clone(), got = p.clone();
    want.add_(v, -1 * lr);
    tb::num::add_scaled(got.data_ptr<float>(), v.data_ptr<float>(), size_t(n), float(-1 * lr));
    // Held to its baseline kernels (ATEN_CPU_CAPABILITY=default), ATen rounds the product and
    // the sum apart, and the fused SGD step is not taken (FusedMomentumStep... below).
    const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
    const bool fma = !forced || std::string(forced) != "default";
    const torch::Tensor twice = p - (v * float(lr));
    if (fma) EXPECT_TRUE(torch::equal(want, got)) << "p.add_(v, -lr), n=" << n;
    if (!fma) EXPECT_TRUE(torch::equal(want, twice)) << "p.add_(v, -lr) unfused, n=" << n;
    // Two roundings differ from one somewhere in these tensors: the check can tell them apart.
    if (n == 70001)
      EXPECT_FALSE(torch::equal(got, twice)) << "no element tells fma from mul-then-add";
    want = p.clone(), got = p.clone();
    want.sub_(v * lr);
    tb::num::sub_product(got.data_ptr<float>(), v.data_ptr<float>(), size_t(n), float(lr));
    EXPECT_TRUE(torch::equal(want, got)) << "p.sub_(v * lr), n=" << n;
    // Both updates in one loop: the two functions' values, and the new tensors' largest
    // magnitudes with NaN left out (one planted where there is room), folded into what the
    // accumulators held.
    torch::Tensor pb = p.clone(), vb = v.clone(), pw = p.clone(), vw = v.clone();
    if (n > 20) g[n / 2] = std::nanf("");
    tb::num::momentum_buffer(vw.data_ptr<float>(), g.data_ptr<float>(), size_t(n), float(momentum));
    tb::num::add_scaled(pw.data_ptr<float>(), vw.data_ptr<float>(), size_t(n), float(-1 * lr));
    // What earlier chunks left: amax_p's is larger than any here and must stay.
    const float big = 1e6f;
    uint32_t amax_b = 0, amax_p;
    std::memcpy(&amax_p, &big, 4);
    tb::num::momentum_add_amax(pb.data_ptr<float>(), vb.data_ptr<float>(), g.data_ptr<float>(),
                               size_t(n), float(momentum), float(-1 * lr), &amax_b, &amax_p);
    EXPECT_TRUE(torch::equal(pb.isnan(), pw.isnan()) &&
                torch::equal(pb.nan_to_num(), pw.nan_to_num()))
        << "parameters, n=" << n;
    EXPECT_TRUE(torch::equal(vb.isnan(), vw.isnan()) &&
                torch::equal(vb.nan_to_num(), vw.nan_to_num()))
        << "buffer, n=" << n;
    const auto amax_bits = [](const torch::Tensor& t) {
      const float a = t.abs().nan_to_num(0.0, INFINITY).max().item<float>();
      uint32_t b;
      std::memcpy(&b, &a, 4);
      return b;
    };
    EXPECT_EQ(amax_b, amax_bits(vw)) << "n=" << n;
    uint32_t big_bits;
    std::memcpy(&big_bits, &big, 4);
    EXPECT_EQ(amax_p, big_bits) << "n=" << n;
    uint32_t amax_p2 = 0;
    pb = p.clone(), vb = v.clone();
    tb::num::momentum_add_amax(pb.data_ptr<float>(), vb.data_ptr<float>(), g.data_ptr<float>(),
                               size_t(n), float(momentum), float(-1 * lr), &amax_b, &amax_p2);
    EXPECT_EQ(amax_p2, amax_bits(pw)) << "n=" << n;
  }
}

// The fused momentum step (emulation/fused_update.h) against the unfused sequence it replaces,
// bit for bit: element, block, MX, NVFP4 (1-D and 2-D tiles, whose tile scales need the whole
// tensor's amax first) and stochastic points, on shapes whose rows do and do not fill chunks,
// over two steps (the stochastic streams advance per call), in both rules; a tensor of over a
// million elements runs its chunks on threads.
TEST(NumericsTorch, FusedMomentumStepIsTheUnfusedSequence) {
  using tb::emu::MomentumRule;
  using tb::emu::QuantPoint;
  // Block formats with partial=on: the shapes' rows of 784 and 17 end in short blocks, which the
  // chunks must round as the whole tensor's call does.
  const std::string mx_e4m3 = "mx:elem=e4m3,block=32,partial=on",
                    mx_e5m2 = "mx:elem=e5m2,block=32,partial=on",
                    fp4 = "nvfp4:block=16,rows=1,partial=on",
                    fp4_2d = "nvfp4:block=16,rows=16,partial=on";
  const std::vector<std::pair<std::string, std::string>> points = {
      {"off", "off"},
      {"e5m2", "e4m3"},
      {"bf16/stochastic", "bf16"},
      {mx_e5m2, mx_e4m3},
      {"mx:elem=e4m3,block=32,scale=rceil,partial=on", "bfp:block=16,m=7,e=8,partial=on"},
      {fp4, fp4_2d},
      {fp4 + "/stochastic", "e4m3"},
      {"e4m3", fp4},
      {"fixed:w=8,f=4", fp4_2d + "/stochastic"},
      {"nvfp4:block=16,rows=12,partial=on", fp4_2d}};  // tile heights 12 and 16: chunks of 48 rows
  const std::vector<std::vector<int64_t>> shapes = {{256, 784}, {10, 256}, {256},
                                                    {33, 7},    {40, 17},  {1100, 1024}};
  int compared = 0;
  // Two threads for the tensor of over a million elements, whose chunks then run on both.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  const uint64_t fused_before = tb::emu::fused_steps();
  for (const auto rule : {MomentumRule::kTorchSgd, MomentumRule::kRoundStateFirst}) {
    for (const auto& [so, mo] : points) {
      for (const auto& shape : shapes) {
        if (shape[0] == 1100 && so != fp4 && so != mx_e5m2) continue;  // time
        torch::manual_seed(5);
        const torch::Tensor p0 = torch::randn(shape) * 0.05, b0 = torch::randn(shape) * 1e-3;
        const torch::Tensor g1 = torch::randn(shape) * 1e-2, g2 = torch::randn(shape) * 1e-2;
        const auto run = [&](bool fused) {
          tb::emu::set_fused_updates(fused);
          const QuantPoint s = QuantPoint::parse(so, 3), m = QuantPoint::parse(mo, 4);
          torch::Tensor p = p0.clone(), b = b0.clone();
          for (const auto& g : {g1, g2}) tb::emu::momentum_step(rule, p, b, g, 0.9, 0.01, s, m);
          tb::emu::set_fused_updates(true);
          return std::make_pair(p, b);
        };
        ASSERT_TRUE(
            tb::emu::fuses_momentum_step(p0, b0, g1, QuantPoint::parse(so), QuantPoint::parse(mo)));
        const auto [pf, bf] = run(true);
        const auto [pu, bu] = run(false);
        const std::string what = so + " / " + mo + " on " + std::to_string(shape[0]) +
                                 (shape.size() > 1 ? "x" + std::to_string(shape[1]) : "") +
                                 (rule == MomentumRule::kTorchSgd ? ", torch" : ", state first");
        EXPECT_TRUE(torch::equal(pf, pu)) << "parameters: " << what;
        EXPECT_TRUE(torch::equal(bf, bu)) << "buffers: " << what;
        EXPECT_FALSE(torch::equal(pf, p0)) << what << ": the step changed nothing";
        ++compared;
      }
    }
  }
  at::set_num_threads(threads);
  EXPECT_GT(compared, 80);
  // Each comparison ran two fused updates (the unfused run none), unless ATen is held to its
  // baseline kernels, where LibTorch's SGD step rounds twice and is not fused.
  const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
  if (!forced || std::string(forced) != "default")
    EXPECT_EQ(tb::emu::fused_steps() - fused_before, uint64_t(2 * compared));
  // Where the points cannot round in chunks, the step is the unfused sequence.
  EXPECT_FALSE(tb::emu::fuses_momentum_step(torch::zeros({4, 32}), torch::zeros({4, 32}),
                                            torch::zeros({4, 32}),
                                            QuantPoint::parse("e4m3@current"), QuantPoint()));
  EXPECT_FALSE(tb::emu::fuses_momentum_step(torch::zeros({4, 32}).t(), torch::zeros({32, 4}),
                                            torch::zeros({32, 4}), QuantPoint(), QuantPoint()));
  EXPECT_FALSE(tb::emu::fuses_momentum_step(torch::zeros({4, 32}), torch::zeros({4, 32}),
                                            torch::zeros({4, 32}).to_sparse(), QuantPoint(),
                                            QuantPoint()));
}

}  // namespace
