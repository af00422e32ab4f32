// Number formats as values: what a proposed accelerator stores and computes in. Plain C++ over
// float arrays, no LibTorch, so the library can be used (and tested) on its own.
//
// Every format here is a subset of float32's values, so a quantized tensor is still a float32
// tensor holding exactly representable values; formats whose values would not all fit in
// float32 (a wider range, or fixed-point words over 24 bits) are rejected when described.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb::num {

// What the all-ones exponent (and the sign bit) mean.
enum class Special {
  kIeee,  // all-ones exponent: Inf (mantissa 0) and NaN; signed zeros
  kFn,    // OCP FP8 "fn": no Inf; only S.1..1.1..1 is NaN, the rest of the top binade is finite
  kFnuz,  // no Inf, no negative zero; the single NaN is the pattern 1.0..0.0..0 ("-0")
  kNone,  // every pattern is a finite number (the MX element formats fp6/fp4)
};

// What a value beyond the largest finite one becomes (rounding first, as if the exponent
// were unbounded, so only values that round past the maximum overflow).
enum class Overflow {
  kSaturate,  // +-max finite (Inf inputs too)
  kInfinity,  // +-Inf where the format has Inf, NaN where it does not
};

enum class Rounding { kNearestEven, kTiesAway, kTowardZero, kStochastic };

// A binary floating-point format with 1 sign bit, `exp_bits` exponent bits and `man_bits`
// stored mantissa bits (implicit leading one for normal numbers).
struct FloatFormat {
  int exp_bits = 8;
  int man_bits = 23;
  int bias = 127;
  bool subnormals = true;
  Special special = Special::kIeee;
  Overflow overflow = Overflow::kInfinity;

  int bits() const { return 1 + exp_bits + man_bits; }
  int emin() const { return 1 - bias; }  // exponent of the smallest normal number
  int emax() const;                      // exponent of the largest finite number
  double max_finite() const;
  double min_normal() const;
  double min_subnormal() const;  // min_normal() when subnormals are off
  bool has_inf() const { return special == Special::kIeee; }
  bool has_nan() const { return special != Special::kNone; }
  bool operator==(const FloatFormat& o) const;
  bool operator!=(const FloatFormat& o) const { return !(*this == o); }
};

// Two's-complement (or unsigned) fixed point: `word_bits` bits of which `frac_bits` are
// fractional, value = integer * 2^-frac_bits. Out-of-range values saturate or wrap.
struct FixedFormat {
  int word_bits = 16;
  int frac_bits = 8;
  bool is_signed = true;
  bool saturate = true;

  double max_value() const;
  double min_value() const;
  bool operator==(const FixedFormat& o) const;
};

// A shared scale per block of `block` consecutive elements (blocks never cross a row of `row`
// elements, see quantize()). Three kinds:
//  - kBfp: block floating point; the shared exponent is the block's largest exponent, each
//    element a sign and `man_bits` magnitude bits with no implicit one, saturating.
//  - kMx: OCP Microscaling v1.0; an E8M0 scale 2^X and elements in `element` (saturating), or
//    int8 elements (value = k * 2^-6 * scale). X by `scale_mode`, amax the block's largest
//    finite magnitude and emax the element's largest exponent (torchao's ScaleCalculationMode):
//      floor  floor(log2(amax)) - emax (the OCP specification)
//      ceil   ceil(log2(amax)) - emax
//      even   floor(log2(amax rounded to the element's mantissa bits, ties up)) - emax
//      rceil  ceil(log2(amax * (1 / element max))), in float32 (NVIDIA's cvt.rp.ue8m0)
//  - kNvfp4: NVIDIA NVFP4 as Transformer Engine computes it: E2M1 elements, an E4M3 scale per
//    block, and a float32 scale for the whole tensor. Blocks are `rows` x `block` tiles (rows
//    1: 1-D blocks along a row; 16: the recipe's 16 x 16 weight tiles). With T the tensor's
//    amax (QuantOptions::tensor_amax) and a a tile's:
//      S_enc = 448 * 6 / T (1 where T is 0 or S_enc is 0; at most FLT_MAX)
//      s     = e4m3(a * (S_enc * (1/6)))           the stored block scale, saturating
//      q     = e2m1(x * (1 / (s * (1 / S_enc))))   the element, per the rounding mode
//      value = q * s * (1 / S_enc)
struct BlockFormat {
  enum class Kind { kBfp, kMx, kNvfp4 };
  enum class ScaleMode { kFloor, kCeil, kEven, kRceil };
  Kind kind = Kind::kMx;
  int block = 32;
  int man_bits = 7;                          // kBfp: magnitude bits per element
  int scale_bits = 8;                        // kBfp: shared exponent bits (biased like IEEE)
  std::string element = "e4m3";              // kMx: element preset name, or "int8"
  ScaleMode scale_mode = ScaleMode::kFloor;  // kMx
  int rows = 1;                              // kNvfp4: tile height in rows
  // Whether a tensor whose rows `block` does not divide may be rounded, each row ending in a
  // shorter block (microxcaling pads it with zeros, which leaves the block's scale the same).
  // Off, as Transformer Engine and torchao refuse such a tensor: emulation/ stops with an
  // error naming the point. quantize() itself rounds short blocks either way.
  bool partial = false;
  bool operator==(const BlockFormat& o) const;
};

struct Format {
  enum class Kind { kFloat, kFixed, kBlock };
  Kind kind = Kind::kFloat;
  FloatFormat fp;
  FixedFormat fx;
  BlockFormat blk;
  std::string name;  // preset name when it came from one; not part of equality

  // Canonical text, every field spelled out: parse_format(str()) == *this.
  std::string str() const;
  // The preset name when it has one, else str(): how results and tables name it.
  std::string display_name() const { return name.empty() ? str() : name; }
  // Total bits per element (block formats: element bits, plus the scale amortized).
  double bits_per_element() const;
  bool operator==(const Format& o) const;
  bool operator!=(const Format& o) const { return !(*this == o); }
};

// Parses a preset name (`bf16`, `e4m3`, `mxfp4_e2m1`, ...), `eXmY` (IEEE conventions), or a
// descriptor: `fp:e=4,m=3[,bias=7][,sub=on][,special=fn][,overflow=sat]`,
// `fixed:w=16,f=8[,signed=on][,sat=on]`, `bfp:block=16,m=7[,e=8]`,
// `mx:elem=e4m3[,block=32][,scale=floor|ceil|even|rceil]`, `nvfp4[:block=16][,rows=1]`; block
// formats take `,partial=on` (BlockFormat::partial).
// Throws tb::UsageError naming the field and value.
Format parse_format(const std::string& text);

Rounding parse_rounding(const std::string& text);
std::string rounding_name(Rounding r);
std::string scale_mode_name(BlockFormat::ScaleMode m);
std::string special_name(Special s);

struct Preset {
  std::string name;
  std::string summary;
};
const std::vector<Preset>& format_presets();

// Checks a float format can be emulated exactly in float32; throws tb::UsageError.
void validate(const FloatFormat& f);

}  // namespace tb::num
