// Prints one line per case, a case's name and a digest of the bits the numerics library computed
// for it: every format (presets and descriptors) in every rounding mode on inputs with and
// without NaN, Inf, -0 and subnormals, in several shapes, streamed and not, on one and two
// threads; the per-block scaled entry points and recipes; the MAD unit; the fused update's
// arithmetic; the amax and finiteness passes. All of it twice: under the default MXCSR and
// under flush-to-zero and denormals-are-zero, as trainbench's runtime sets it.
//
// Built against the library as it ships (AVX-512 kernels and target clones, picked at run time)
// and against its portable builds (no x86 kernels: what a CPU without AVX-512 or another
// architecture runs; tests/CMakeLists.txt). The test NumericsPortable (numerics_portable.sh)
// compares the programs' lines: the library promises the same bits on every machine.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "numerics/format.h"
#include "numerics/mad.h"
#include "numerics/quantize.h"
#include "numerics/round_bits.h"
#include "numerics/scaling.h"
#include "numerics/update.h"

namespace {

using tb::num::Format;
using tb::num::QuantOptions;
using tb::num::Rounding;

using tb::num::kernel::as_bits;
using tb::num::kernel::as_float;

// NUMERICS_DIGEST_DUMP=TEXT: the cases whose name contains TEXT print every value digested, a
// line each, after their digest line (to find where two builds differ: diff the dumps).
const char* const g_dump = std::getenv("NUMERICS_DIGEST_DUMP");

// FNV-1a over the values' bit patterns (NaN payloads and signs included).
struct Digest {
  uint64_t h = 0xcbf29ce484222325ull;
  std::vector<uint32_t> values;  // with NUMERICS_DIGEST_DUMP only
  void add(uint32_t v) {
    if (g_dump) values.push_back(v);
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xFFu;
      h *= 0x100000001b3ull;
    }
  }
  void add(const std::vector<float>& v) {
    for (const float f : v) add(as_bits(f));
  }
  void add(float f) { add(as_bits(f)); }
};

void line(const std::string& name, const Digest& d) {
  fmt::print("{} {:016x}\n", name, d.h);
  if (g_dump && name.find(g_dump) != std::string::npos)
    for (size_t i = 0; i < d.values.size(); ++i)
      fmt::print("  {} {:08x} {}\n", i, d.values[i], as_float(d.values[i]));
}

// Inputs: values of a few magnitudes, with or without the special values the kernels treat
// apart (a fast path for tiles without NaN, signs of zero, subnormals), or any bit pattern.
enum class Input { kPlain, kSpecials, kBits, kWide };
const char* input_name(Input i) {
  switch (i) {
    case Input::kPlain:
      return "plain";
    case Input::kSpecials:
      return "specials";
    case Input::kBits:
      return "bits";
    case Input::kWide:
      return "wide";
  }
  return "?";
}

std::vector<float> make_input(Input kind, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1e-40f,
                            -3e-39f,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::min(),
                            448.0f,
                            -57344.0f,
                            6.0f,
                            0.25f};
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
      case Input::kPlain:
        // Mostly small, some rows' worth larger: block scales differ from block to block.
        x[i] = normal(rng) * ((i / 64) % 5 == 0 ? 40.0f : 0.05f);
        break;
      case Input::kSpecials:
        x[i] = unit(rng) < 0.02f ? specials[rng() % std::size(specials)] : normal(rng) * 0.3f;
        break;
      case Input::kBits:
        x[i] = as_float(uint32_t(rng()));
        break;
      case Input::kWide:
        x[i] = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(unit(rng) * 80.0f - 60.0f);
        break;
    }
  }
  return x;
}

struct Shape {
  size_t n, row;
};

// One quantize() call's digest line; an error (a format the call refuses) is a line too.
// `want_amax`: the input's amax requested from the call (QuantOptions::input_amax) and digested.
// `in_place`: the output is the input (the optimizer state's and master weights' rounding).
void quantize_case(const std::string& name, const Format& f, const std::vector<float>& x,
                   const QuantOptions& o, bool want_amax = false, bool in_place = false) {
  Digest d;
  try {
    std::vector<float> y = in_place ? x : std::vector<float>(x.size(), -1.0f);
    float amax = -2.0f;
    QuantOptions mine = o;
    if (want_amax) mine.input_amax = &amax;
    tb::num::quantize(f, in_place ? y.data() : x.data(), y.data(), x.size(), mine);
    d.add(y);
    if (want_amax) d.add(amax);
    line(name, d);
  } catch (const std::exception& e) {
    fmt::print("{} error: {}\n", name, e.what());
  }
}

void quantizers(const std::string& mode) {
  std::vector<std::string> formats;
  for (const auto& p : tb::num::format_presets()) formats.push_back(p.name);
  for (const char* d : {"fp:e=8,m=3,bias=140",
                        "fp:e=4,m=3,sub=off",
                        "fp:e=5,m=2,overflow=sat",
                        "fp:e=3,m=0,special=none",
                        "fp:e=8,m=20",
                        "fp:e=2,m=5,special=none",
                        "fp:e=4,m=3,special=fn,overflow=sat",
                        "fp:e=5,m=2,special=fnuz",
                        "fixed:w=8,f=4",
                        "fixed:w=8,f=4,sat=off",
                        "fixed:w=12,f=-3,signed=off",
                        "fixed:w=12,f=-3,sat=off",
                        "fixed:w=24,f=20",
                        "bfp:block=8,m=3",
                        "bfp:block=32,m=7,e=6",
                        "mx:elem=e4m3,block=32,scale=rceil",
                        "mx:elem=e5m2,scale=ceil",
                        "mx:elem=e2m1,scale=even",
                        "mx:elem=e3m4",
                        "mx:elem=int8,block=16",
                        "mx:elem=e2m3,block=8",
                        "nvfp4:rows=4",
                        "nvfp4:block=8"})
    formats.push_back(d);
  const Shape shapes[] = {
      {4099, 0}, {64 * 784, 784}, {64 * 10, 10}, {35 * 48, 48}, {40 * 256, 256}};
  const Input inputs[] = {Input::kPlain, Input::kSpecials, Input::kBits, Input::kWide};
  const Rounding roundings[] = {Rounding::kNearestEven, Rounding::kTiesAway, Rounding::kTowardZero,
                                Rounding::kStochastic};
  uint32_t seed = 1;
  for (const std::string& text : formats) {
    const Format f = tb::num::parse_format(text);
    const bool fl = f.kind == Format::Kind::kFloat;
    const bool nvfp4 =
        f.kind == Format::Kind::kBlock && f.blk.kind == tb::num::BlockFormat::Kind::kNvfp4;
    for (const Input in : inputs)
      for (const Shape& s : shapes) {
        const std::vector<float> x = make_input(in, s.n, seed++);
        for (const Rounding r : roundings)
          for (const bool stream : {false, true}) {
            QuantOptions o;
            o.rounding = r;
            o.row = s.row;
            o.seed = 0x5EED0000u + seed;
            // Stochastic rows that cross a 2^32 boundary of the element index draw their high
            // word apart.
            o.offset = r == Rounding::kStochastic && s.row == 784 ? (uint64_t(1) << 32) - 777 : 31;
            o.stream_above = stream ? 1000 : s.n + 1;
            std::string name = fmt::format("{} quantize {} {} {} n={} row={}{}", mode, text,
                                           tb::num::rounding_name(r), input_name(in), s.n, s.row,
                                           stream ? " stream" : "");
            quantize_case(name, f, x, o);
            if (!stream) quantize_case(name + " in-place", f, x, o, false, true);
            // A scaling recipe's per-tensor scale, with the input's amax taken in the pass.
            if (fl && s.row == 0) {
              QuantOptions so = o;
              so.scale = in == Input::kWide ? 0x1p-20f : 3.5f;
              quantize_case(name + " scale", f, x, so, true);
            }
            // NVFP4 rounding a part of a larger tensor: the tensor's amax given.
            if (nvfp4) {
              QuantOptions to = o;
              to.tensor_amax = 1.5f * tb::num::tensor_amax(x.data(), x.size());
              quantize_case(name + " tensor-amax", f, x, to);
            }
          }
      }
    // Two threads (a call of 64K elements or more is split).
    const std::vector<float> big = make_input(Input::kSpecials, 70001, seed++);
    for (const Rounding r : roundings)
      for (const bool stream : {false, true}) {
        QuantOptions o;
        o.rounding = r;
        o.row = f.kind == Format::Kind::kBlock ? 1024 : 0;
        o.seed = 99;
        o.threads = 2;
        o.stream_above = stream ? 1000 : 0;
        quantize_case(fmt::format("{} quantize {} {} threads=2 n=70001{}", mode, text,
                                  tb::num::rounding_name(r), stream ? " stream" : ""),
                      f, big, o);
      }
  }
}

void scaled(const std::string& mode) {
  const std::vector<float> x = make_input(Input::kSpecials, 128 * 256, 7);
  const std::vector<float> w = make_input(Input::kWide, 128 * 256, 8);
  for (const char* text : {"e4m3", "e5m2", "bf16", "e2m1", "fp16"}) {
    const Format f = tb::num::saturating(tb::num::parse_format(text));
    for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTowardZero})
      for (const bool stream : {false, true}) {
        // Per-block scales, as a recipe computes them.
        const size_t block = 96;
        std::vector<float> scales((x.size() + block - 1) / block), amax(scales.size());
        tb::num::block_amaxes(x.data(), x.size(), block, amax.data(), false);
        tb::num::block_amaxes(w.data(), w.size(), block, amax.data(), true);
        for (size_t b = 0; b < scales.size(); ++b)
          scales[b] = tb::num::block_scale(tb::num::scaling_max(f), amax[b], b % 2 == 0);
        QuantOptions o;
        o.rounding = r;
        o.seed = 5;
        o.offset = 11;
        std::vector<float> y(x.size());
        tb::num::quantize_blocks_scaled(f, x.data(), y.data(), x.size(), block, scales.data(), o,
                                        stream);
        Digest d;
        d.add(amax);
        d.add(scales);
        d.add(y);
        line(fmt::format("{} blocks-scaled {} {}{}", mode, text, tb::num::rounding_name(r),
                         stream ? " stream" : ""),
             d);
        for (const char* recipe :
             {"block:1x128", "block:1x32:pow2", "block:128x128", "block:4x64"}) {
          Digest dr;
          try {
            const auto s = tb::num::parse_scaling(recipe, f, text);
            tb::num::RangeCounts c;
            tb::num::quantize_block_scaled(f, s, w.data(), y.data(), w.size(), 256, o, &c);
            dr.add(y);
            for (const uint64_t v : {c.values, c.overflow, c.underflow, c.nonfinite})
              dr.add(uint32_t(v));
            line(fmt::format("{} recipe {}@{} {}", mode, text, recipe, tb::num::rounding_name(r)),
                 dr);
          } catch (const std::exception& e) {
            fmt::print("{} recipe {}@{} {} error: {}\n", mode, text, recipe,
                       tb::num::rounding_name(r), e.what());
          }
        }
      }
  }
}

void mad(const std::string& mode) {
  const char* units[] = {"mad:mul=e5m2,acc=fp16,width=4,order=lanes",
                         "mad:mul=fp32,acc=fp32,width=4,order=lanes",
                         "mad:mul=e5m2,acc=fp32,width=4,order=lanes",
                         "mad:mul=fp32,acc=fp16,width=4,order=lanes",
                         "mad:mul=e4m3,acc=bf16,width=8,order=tree",
                         "mad:mul=bf16,acc=fp32,width=1,order=sequential",
                         "mad:mul=e5m2,acc=fp16,width=4,order=lanes,rounding=stochastic",
                         "mad:mul=e4m3,acc=q8.8,width=2,order=lanes",
                         "mad:mul=e4m3,acc=fp16,width=4,order=lanes",
                         "mad:mul=e4m3,acc=bf16,width=4,order=lanes",
                         "mad:mul=e4m3,acc=bf16,width=4,order=sequential",
                         "mad:mul=e5m2,acc=fp32,width=4,order=tree,rounding=toward-zero",
                         "mad:mul=fp16,acc=fp16,width=16,order=lanes,rounding=ties-away"};
  const int64_t M = 33, N = 19, K = 70;
  for (const char* text : units) {
    Digest d;
    try {
      const tb::num::MadUnit u = tb::num::parse_mad(text);
      // Operands with specials, and without (the lean kernels take exact products only).
      for (const char* operands : {"e4m3", "e5m2", "bf16"})
        for (const Input a_input : {Input::kSpecials, Input::kPlain}) {
          const Format in = tb::num::parse_format(operands);
          std::vector<float> A = make_input(a_input, size_t(M * K), 21);
          std::vector<float> B = make_input(Input::kPlain, size_t(K * N), 22);
          for (auto* v : {&A, &B})
            for (float& e : *v)
              // e4m3 has no Inf: beyond its range a value would be NaN.
              e = tb::num::quantize_one(in, std::string(operands) == "e4m3" && std::isfinite(e)
                                                ? std::fmin(std::fmax(e, -448.0f), 448.0f)
                                                : e);
          for (const int threads : {1, 2}) {
            std::vector<float> C(size_t(M * N));
            tb::num::mad_matmul(u, A.data(), B.data(), C.data(), M, N, K, threads);
            d.add(C);
          }
        }
      line(fmt::format("{} mad {}", mode, text), d);
    } catch (const std::exception& e) {
      fmt::print("{} mad {} error: {}\n", mode, text, e.what());
    }
  }
}

void updates(const std::string& mode) {
  const size_t n = 10007;
  const std::vector<float> g = make_input(Input::kSpecials, n, 31);
  const std::vector<float> b0 = make_input(Input::kPlain, n, 32);
  const std::vector<float> p0 = make_input(Input::kWide, n, 33);
  Digest d;
  auto b = b0, p = p0;
  tb::num::momentum_buffer(b.data(), g.data(), n, 0.9f);
  d.add(b);
  tb::num::add_scaled(p.data(), b.data(), n, -0.05f);
  d.add(p);
  tb::num::sub_product(p.data(), b.data(), n, 0.05f);
  d.add(p);
  b = b0, p = p0;
  uint32_t ab = 0, ap = 0;
  tb::num::momentum_add_amax(p.data(), b.data(), g.data(), n, 0.9f, -0.05f, &ab, &ap);
  d.add(b);
  d.add(p);
  d.add(ab);
  d.add(ap);
  uint32_t a1 = 0, a2 = 0;
  tb::num::momentum_buffer_amax(b.data(), g.data(), n, 0.9f, &a1);
  tb::num::sub_product_amax(p.data(), b.data(), n, 0.05f, &a2);
  d.add(b);
  d.add(p);
  d.add(a1);
  d.add(a2);
  line(mode + " update", d);
}

void passes(const std::string& mode) {
  Digest d;
  for (const Input in : {Input::kPlain, Input::kSpecials, Input::kBits, Input::kWide})
    for (const size_t n : {size_t(1), size_t(17), size_t(4099), size_t(200003)}) {
      const std::vector<float> x = make_input(in, n, uint32_t(n) + 41);
      for (const int threads : {1, 2}) d.add(tb::num::tensor_amax(x.data(), n, threads));
      d.add(uint32_t(tb::num::all_finite(x.data(), n)));
    }
  for (uint64_t i = 0; i < 64; ++i) d.add(tb::num::random_bits(1234567, (i << 27) + i));
  line(mode + " passes", d);
}

void run(const std::string& mode) {
  quantizers(mode);
  scaled(mode);
  mad(mode);
  updates(mode);
  passes(mode);
}

}  // namespace

int main() {
  try {
    run("ieee");
#if defined(__SSE2__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);  // FTZ and DAZ
    run("ftz");
    _mm_setcsr(saved);
#endif
  } catch (const std::exception& e) {  // a case list this program cannot set up
    fmt::print(stderr, "numerics_digest: {}\n", e.what());
    return 1;
  }
  return 0;
}
