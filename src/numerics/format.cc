#include "numerics/format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

#include "base/errors.h"

namespace tb::num {
namespace {

FloatFormat make_fp(int e, int m, Special special, Overflow overflow, bool sub = true) {
  FloatFormat f;
  f.exp_bits = e;
  f.man_bits = m;
  f.bias = special == Special::kFnuz ? (1 << (e - 1)) : (1 << (e - 1)) - 1;
  f.subnormals = sub;
  f.special = special;
  f.overflow = overflow;
  return f;
}

Format float_format(const FloatFormat& f, const std::string& name) {
  Format r;
  r.kind = Format::Kind::kFloat;
  r.fp = f;
  r.name = name;
  return r;
}

Format mx_format(const std::string& element, const std::string& name) {
  Format r;
  r.kind = Format::Kind::kBlock;
  r.blk.kind = BlockFormat::Kind::kMx;
  r.blk.block = 32;
  r.blk.element = element;
  r.name = name;
  return r;
}

struct PresetDef {
  std::string summary;
  Format format;
};

const std::vector<std::pair<std::string, PresetDef>>& preset_table() {
  static const auto* table = [] {
    const auto kI = Special::kIeee;
    const auto kInf = Overflow::kInfinity;
    const auto kSat = Overflow::kSaturate;
    auto* t = new std::vector<std::pair<std::string, PresetDef>>;
    auto fp = [&](const std::string& n, FloatFormat f, const std::string& s) {
      t->push_back({n, {s, float_format(f, n)}});
    };
    fp("fp32", make_fp(8, 23, kI, kInf), "IEEE 754 binary32 (identity)");
    fp("bf16", make_fp(8, 7, kI, kInf), "bfloat16: float32's range, 8 bits of precision");
    fp("fp16", make_fp(5, 10, kI, kInf), "IEEE 754 binary16");
    fp("tf32", make_fp(8, 10, kI, kInf),
       "NVIDIA TensorFloat-32: float32's range, fp16's precision (tensor-core inputs)");
    fp("fp8_152", make_fp(5, 2, kI, kInf), "Wang et al. 2018 fp8 (1,5,2), IEEE conventions");
    fp("fp16_169", make_fp(6, 9, kI, kInf), "Wang et al. 2018 fp16 (1,6,9), IEEE conventions");
    fp("e4m3", make_fp(4, 3, Special::kFn, kInf), "OCP FP8 E4M3 (fn): no Inf, NaN S.1111.111");
    fp("e5m2", make_fp(5, 2, kI, kInf), "OCP FP8 E5M2: IEEE conventions");
    fp("e4m3fnuz", make_fp(4, 3, Special::kFnuz, kInf), "E4M3 fnuz: bias 8, NaN 0x80, no -0");
    fp("e5m2fnuz", make_fp(5, 2, Special::kFnuz, kInf), "E5M2 fnuz: bias 16, NaN 0x80, no -0");
    fp("e3m4", make_fp(3, 4, Special::kFn, kInf), "FP8 E3M4 (fn conventions): max 30");
    fp("e2m3", make_fp(2, 3, Special::kNone, kSat), "OCP MX FP6 E2M3 element: no Inf/NaN");
    fp("e3m2", make_fp(3, 2, Special::kNone, kSat), "OCP MX FP6 E3M2 element: no Inf/NaN");
    fp("e2m1", make_fp(2, 1, Special::kNone, kSat), "OCP MX FP4 E2M1 element: no Inf/NaN");
    auto fixed = [&](const std::string& n, int w, int f, const std::string& s) {
      Format r;
      r.kind = Format::Kind::kFixed;
      r.fx.word_bits = w;
      r.fx.frac_bits = f;
      r.name = n;
      t->push_back({n, {s, r}});
    };
    fixed("int8", 8, 0, "8-bit signed integer, saturating");
    fixed("q8.8", 16, 8, "16-bit fixed point, 8 fraction bits, saturating");
    for (const auto& [n, e] :
         std::vector<std::pair<std::string, std::string>>{{"mxfp8_e4m3", "e4m3"},
                                                          {"mxfp8_e5m2", "e5m2"},
                                                          {"mxfp6_e2m3", "e2m3"},
                                                          {"mxfp6_e3m2", "e3m2"},
                                                          {"mxfp4_e2m1", "e2m1"},
                                                          {"mxint8", "int8"}})
      t->push_back({n, {"OCP MX: 32 " + e + " elements sharing an E8M0 scale", mx_format(e, n)}});
    for (const int rows : {1, 16}) {
      Format nv;
      nv.kind = Format::Kind::kBlock;
      nv.blk.kind = BlockFormat::Kind::kNvfp4;
      nv.blk.block = 16;
      nv.blk.element = "e2m1";
      nv.blk.rows = rows;
      nv.name = rows == 1 ? "nvfp4" : "nvfp4_2d";
      t->push_back({nv.name,
                    {rows == 1 ? "NVIDIA NVFP4: 16 E2M1 elements sharing an E4M3 scale, "
                                 "and a float32 tensor scale"
                               : "NVFP4 with 16 x 16 tiles sharing a scale (weights)",
                     nv}});
    }
    Format bfp;
    bfp.kind = Format::Kind::kBlock;
    bfp.blk.kind = BlockFormat::Kind::kBfp;
    bfp.blk.block = 16;
    bfp.blk.man_bits = 7;
    bfp.name = "bfp8";
    t->push_back(
        {"bfp8", {"block floating point: 16 x (sign + 7 bits), 8-bit shared exponent", bfp}});
    return t;
  }();
  return *table;
}

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw UsageError("format '" + text + "': " + why);
}

int to_int(const std::string& text, const std::string& key, const std::string& v) {
  size_t used = 0;
  int r = 0;
  try {
    r = std::stoi(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != v.size()) bad(text, key + "=" + v + " is not an integer");
  return r;
}

bool to_bool(const std::string& text, const std::string& key, const std::string& v) {
  if (v == "on" || v == "1" || v == "true" || v == "yes") return true;
  if (v == "off" || v == "0" || v == "false" || v == "no") return false;
  bad(text, key + "=" + v + " (expected on|off)");
}

std::map<std::string, std::string> key_values(const std::string& text, const std::string& body,
                                              const std::vector<std::string>& allowed) {
  std::map<std::string, std::string> kv;
  // `fp:e=4,m=3,` or `e=4,,m=3`: a list with an item left out, refused as --models' are.
  if (!body.empty() &&
      (body.front() == ',' || body.back() == ',' || body.find(",,") != std::string::npos))
    bad(text, "an empty item (a stray comma?)");
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) bad(text, "'" + item + "' is not key=value");
    const std::string k = item.substr(0, eq);
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      bad(text, "unknown key '" + k + "' (keys: " + list + ")");
    }
    if (kv.count(k)) bad(text, "key '" + k + "' given twice");
    kv[k] = item.substr(eq + 1);
  }
  return kv;
}

bool is_emxm(const std::string& s, int* e, int* m) {
  if (s.size() < 4 || s[0] != 'e') return false;
  const auto mpos = s.find('m');
  if (mpos == std::string::npos || mpos < 2 || mpos + 1 >= s.size()) return false;
  if (mpos > 3 || s.size() - mpos > 3) return false;  // at most two digits each
  for (size_t i = 1; i < s.size(); ++i)
    if (i != mpos && !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  *e = std::stoi(s.substr(1, mpos - 1));
  *m = std::stoi(s.substr(mpos + 1));
  return true;
}

std::string onoff(bool b) { return b ? "on" : "off"; }

}  // namespace

int FloatFormat::emax() const {
  const int top = (1 << exp_bits) - 1;
  return (special == Special::kIeee ? top - 1 : top) - bias;
}

double FloatFormat::max_finite() const {
  // fn loses the all-ones mantissa of the top binade to NaN.
  const double frac = special == Special::kFn ? 2.0 - std::ldexp(1.0, 1 - man_bits)
                                              : 2.0 - std::ldexp(1.0, -man_bits);
  return std::ldexp(frac, emax());
}
double FloatFormat::min_normal() const { return std::ldexp(1.0, emin()); }
double FloatFormat::min_subnormal() const {
  return subnormals ? std::ldexp(1.0, emin() - man_bits) : min_normal();
}
bool FloatFormat::operator==(const FloatFormat& o) const {
  return exp_bits == o.exp_bits && man_bits == o.man_bits && bias == o.bias &&
         subnormals == o.subnormals && special == o.special && overflow == o.overflow;
}

double FixedFormat::max_value() const {
  const int ibits = is_signed ? word_bits - 1 : word_bits;
  return std::ldexp(std::ldexp(1.0, ibits) - 1.0, -frac_bits);
}
double FixedFormat::min_value() const {
  return is_signed ? -std::ldexp(1.0, word_bits - 1 - frac_bits) : 0.0;
}
bool FixedFormat::operator==(const FixedFormat& o) const {
  return word_bits == o.word_bits && frac_bits == o.frac_bits && is_signed == o.is_signed &&
         saturate == o.saturate;
}

bool BlockFormat::operator==(const BlockFormat& o) const {
  if (kind != o.kind || block != o.block || partial != o.partial) return false;
  switch (kind) {
    case Kind::kBfp:
      return man_bits == o.man_bits && scale_bits == o.scale_bits;
    case Kind::kMx:
      return element == o.element && scale_mode == o.scale_mode;
    case Kind::kNvfp4:
      return rows == o.rows;
  }
  return false;
}

bool Format::operator==(const Format& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kFloat:
      return fp == o.fp;
    case Kind::kFixed:
      return fx == o.fx;
    case Kind::kBlock:
      return blk == o.blk;
  }
  return false;
}

std::string special_name(Special s) {
  switch (s) {
    case Special::kIeee:
      return "ieee";
    case Special::kFn:
      return "fn";
    case Special::kFnuz:
      return "fnuz";
    case Special::kNone:
      return "none";
  }
  return "?";
}

std::string Format::str() const {
  switch (kind) {
    case Kind::kFloat: {
      const std::string of = fp.overflow == Overflow::kSaturate ? "sat"
                             : fp.has_inf()                     ? "inf"
                                                                : "nan";
      return "fp:e=" + std::to_string(fp.exp_bits) + ",m=" + std::to_string(fp.man_bits) +
             ",bias=" + std::to_string(fp.bias) + ",sub=" + onoff(fp.subnormals) +
             ",special=" + special_name(fp.special) + ",overflow=" + of;
    }
    case Kind::kFixed:
      return "fixed:w=" + std::to_string(fx.word_bits) + ",f=" + std::to_string(fx.frac_bits) +
             ",signed=" + onoff(fx.is_signed) + ",sat=" + onoff(fx.saturate);
    case Kind::kBlock: {
      // Defaults left out (the floor scale, partial=off), so texts written before those fields
      // existed still name the same format.
      const std::string partial = blk.partial ? ",partial=on" : "";
      if (blk.kind == BlockFormat::Kind::kBfp)
        return "bfp:block=" + std::to_string(blk.block) + ",m=" + std::to_string(blk.man_bits) +
               ",e=" + std::to_string(blk.scale_bits) + partial;
      if (blk.kind == BlockFormat::Kind::kNvfp4)
        return "nvfp4:block=" + std::to_string(blk.block) + ",rows=" + std::to_string(blk.rows) +
               partial;
      return "mx:elem=" + blk.element + ",block=" + std::to_string(blk.block) +
             (blk.scale_mode == BlockFormat::ScaleMode::kFloor
                  ? ""
                  : ",scale=" + scale_mode_name(blk.scale_mode)) +
             partial;
    }
  }
  return "";
}

double Format::bits_per_element() const {
  switch (kind) {
    case Kind::kFloat:
      return fp.bits();
    case Kind::kFixed:
      return fx.word_bits;
    case Kind::kBlock:
      if (blk.kind == BlockFormat::Kind::kBfp)
        return 1 + blk.man_bits + double(blk.scale_bits) / blk.block;
      if (blk.kind == BlockFormat::Kind::kNvfp4) return 4 + 8.0 / (blk.block * blk.rows);
      return (blk.element == "int8" ? 8 : parse_format(blk.element).fp.bits()) + 8.0 / blk.block;
  }
  return 0;
}

void validate(const FloatFormat& f) {
  const auto fail = [&](const std::string& why) {
    throw UsageError("format 'fp:e=" + std::to_string(f.exp_bits) + ",m=" +
                     std::to_string(f.man_bits) + ",bias=" + std::to_string(f.bias) + "': " + why);
  };
  if (f.exp_bits < 1 || f.exp_bits > 8) fail("e must be 1..8");
  if (f.man_bits < 0 || f.man_bits > 23) fail("m must be 0..23");
  if (f.special == Special::kFn && f.man_bits < 1) fail("special=fn needs m >= 1");
  if (f.special == Special::kIeee && (f.exp_bits < 2 || f.man_bits < 1))
    fail("special=ieee needs e >= 2 and m >= 1 (room for Inf and NaN)");
  if (f.special == Special::kNone && f.overflow != Overflow::kSaturate)
    fail("special=none has no Inf or NaN to overflow to: use overflow=sat");
  // Every value must be a float32 value, or results would be rounded twice.
  if (f.emax() > 127) fail("largest value exceeds float32's range (raise the bias)");
  if (f.emin() - (f.subnormals ? f.man_bits : 0) < -149)
    fail("smallest value is below float32's subnormals (lower the bias)");
}

Rounding parse_rounding(const std::string& text) {
  if (text == "nearest" || text == "nearest-even" || text == "rne") return Rounding::kNearestEven;
  if (text == "ties-away" || text == "away" || text == "rna") return Rounding::kTiesAway;
  if (text == "toward-zero" || text == "zero" || text == "rtz") return Rounding::kTowardZero;
  if (text == "stochastic" || text == "sr") return Rounding::kStochastic;
  throw UsageError("rounding '" + text +
                   "': expected nearest-even, ties-away, toward-zero or stochastic");
}

std::string scale_mode_name(BlockFormat::ScaleMode m) {
  switch (m) {
    case BlockFormat::ScaleMode::kFloor:
      return "floor";
    case BlockFormat::ScaleMode::kCeil:
      return "ceil";
    case BlockFormat::ScaleMode::kEven:
      return "even";
    case BlockFormat::ScaleMode::kRceil:
      return "rceil";
  }
  return "";
}

std::string rounding_name(Rounding r) {
  switch (r) {
    case Rounding::kNearestEven:
      return "nearest-even";
    case Rounding::kTiesAway:
      return "ties-away";
    case Rounding::kTowardZero:
      return "toward-zero";
    case Rounding::kStochastic:
      return "stochastic";
  }
  return "?";
}

const std::vector<Preset>& format_presets() {
  static const auto* list = [] {
    auto* l = new std::vector<Preset>;
    for (const auto& [n, d] : preset_table()) l->push_back({n, d.summary});
    return l;
  }();
  return *list;
}

Format parse_format(const std::string& text) {
  for (const auto& [n, d] : preset_table())
    if (n == text) return d.format;
  int e = 0, m = 0;
  if (is_emxm(text, &e, &m)) {
    if (e < 2 || e > 8 || m < 1 || m > 23) bad(text, "eXmY needs X in 2..8 and Y in 1..23");
    Format r;
    r.fp = make_fp(e, m, Special::kIeee, Overflow::kInfinity);
    validate(r.fp);
    r.name = text;
    return r;
  }
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    std::string names;
    for (const auto& [n, d] : preset_table()) names += (names.empty() ? "" : ", ") + n;
    bad(text, "unknown (presets: " + names + "; or eXmY, fp:..., fixed:..., bfp:..., mx:...)");
  }
  const std::string family = text.substr(0, colon), body = text.substr(colon + 1);
  Format r;
  if (family == "fp") {
    auto kv = key_values(text, body, {"e", "m", "bias", "sub", "special", "overflow"});
    if (!kv.count("e") || !kv.count("m")) bad(text, "fp needs e= and m=");
    const int ee = to_int(text, "e", kv["e"]), mm = to_int(text, "m", kv["m"]);
    if (ee < 1 || ee > 8) bad(text, "e=" + kv["e"] + " (expected 1..8)");
    if (mm < 0 || mm > 23) bad(text, "m=" + kv["m"] + " (expected 0..23)");
    Special sp = Special::kIeee;
    if (kv.count("special")) {
      const auto& s = kv["special"];
      if (s == "ieee")
        sp = Special::kIeee;
      else if (s == "fn")
        sp = Special::kFn;
      else if (s == "fnuz")
        sp = Special::kFnuz;
      else if (s == "none")
        sp = Special::kNone;
      else
        bad(text, "special=" + s + " (expected ieee|fn|fnuz|none)");
    }
    Overflow of = sp == Special::kNone ? Overflow::kSaturate : Overflow::kInfinity;
    if (kv.count("overflow")) {
      const auto& s = kv["overflow"];
      if (s == "sat")
        of = Overflow::kSaturate;
      else if (s == "inf" || s == "nan")
        of = Overflow::kInfinity;
      else
        bad(text, "overflow=" + s + " (expected sat|inf|nan)");
      if (s == "inf" && sp != Special::kIeee) bad(text, "overflow=inf needs special=ieee");
      if (s == "nan" && sp == Special::kIeee)
        bad(text, "overflow=nan: special=ieee overflows to inf");
    }
    r.fp = make_fp(ee, mm, sp, of, kv.count("sub") ? to_bool(text, "sub", kv["sub"]) : true);
    if (kv.count("bias")) r.fp.bias = to_int(text, "bias", kv["bias"]);
    validate(r.fp);
    return r;
  }
  if (family == "fixed") {
    auto kv = key_values(text, body, {"w", "f", "signed", "sat"});
    if (!kv.count("w") || !kv.count("f"))
      bad(text, std::string("fixed needs ") + (!kv.count("w") && !kv.count("f")
                                                   ? "w= (total bits) and f= (fraction bits)"
                                               : !kv.count("w") ? "w= (total bits)"
                                                                : "f= (fraction bits)"));
    r.kind = Format::Kind::kFixed;
    r.fx.word_bits = to_int(text, "w", kv["w"]);
    r.fx.frac_bits = to_int(text, "f", kv["f"]);
    if (kv.count("signed")) r.fx.is_signed = to_bool(text, "signed", kv["signed"]);
    if (kv.count("sat")) r.fx.saturate = to_bool(text, "sat", kv["sat"]);
    // Wider words would hold integers float32 cannot: results would be rounded twice.
    if (r.fx.word_bits < (r.fx.is_signed ? 2 : 1) || r.fx.word_bits > 24)
      bad(text, "w=" + kv["w"] + " (expected 2..24: every value must be a float32 value)");
    if (r.fx.frac_bits < -100 || r.fx.frac_bits > 125)
      bad(text, "f=" + kv["f"] + " (expected -100..125)");
    return r;
  }
  if (family == "bfp") {
    auto kv = key_values(text, body, {"block", "m", "e", "partial"});
    r.kind = Format::Kind::kBlock;
    r.blk.kind = BlockFormat::Kind::kBfp;
    r.blk.block = kv.count("block") ? to_int(text, "block", kv["block"]) : 16;
    r.blk.man_bits = kv.count("m") ? to_int(text, "m", kv["m"]) : 7;
    r.blk.scale_bits = kv.count("e") ? to_int(text, "e", kv["e"]) : 8;
    if (r.blk.block < 1 || r.blk.block > 4096) bad(text, "block=" + kv["block"] + " (1..4096)");
    if (r.blk.man_bits < 1 || r.blk.man_bits > 23) bad(text, "m=" + kv["m"] + " (1..23)");
    if (r.blk.scale_bits < 2 || r.blk.scale_bits > 8) bad(text, "e=" + kv["e"] + " (2..8)");
    if (kv.count("partial")) r.blk.partial = to_bool(text, "partial", kv["partial"]);
    return r;
  }
  if (family == "mx") {
    auto kv = key_values(text, body, {"elem", "block", "scale", "partial"});
    r.kind = Format::Kind::kBlock;
    r.blk.kind = BlockFormat::Kind::kMx;
    if (kv.count("scale")) {
      const std::string& m = kv["scale"];
      if (m == "floor")
        r.blk.scale_mode = BlockFormat::ScaleMode::kFloor;
      else if (m == "ceil")
        r.blk.scale_mode = BlockFormat::ScaleMode::kCeil;
      else if (m == "even")
        r.blk.scale_mode = BlockFormat::ScaleMode::kEven;
      else if (m == "rceil")
        r.blk.scale_mode = BlockFormat::ScaleMode::kRceil;
      else
        bad(text, "scale=" + m + " (expected floor|ceil|even|rceil)");
    }
    r.blk.element = kv.count("elem") ? kv["elem"] : "e4m3";
    r.blk.block = kv.count("block") ? to_int(text, "block", kv["block"]) : 32;
    if (r.blk.block < 1 || r.blk.block > 4096) bad(text, "block=" + kv["block"] + " (1..4096)");
    if (r.blk.element != "int8") {
      const auto& names = {"e4m3", "e5m2", "e3m4", "e2m3", "e3m2", "e2m1"};
      if (std::find(names.begin(), names.end(), r.blk.element) == names.end())
        bad(text, "elem=" + r.blk.element + " (expected e4m3|e5m2|e3m4|e2m3|e3m2|e2m1|int8)");
    } else if (r.blk.scale_mode != BlockFormat::ScaleMode::kFloor) {
      bad(text, "scale=" + kv["scale"] + ": int8 elements take the floor scale only");
    }
    if (kv.count("partial")) r.blk.partial = to_bool(text, "partial", kv["partial"]);
    return r;
  }
  if (family == "nvfp4") {
    auto kv = key_values(text, body, {"block", "rows", "partial"});
    r.kind = Format::Kind::kBlock;
    r.blk.kind = BlockFormat::Kind::kNvfp4;
    r.blk.element = "e2m1";
    r.blk.block = kv.count("block") ? to_int(text, "block", kv["block"]) : 16;
    r.blk.rows = kv.count("rows") ? to_int(text, "rows", kv["rows"]) : 1;
    if (r.blk.block < 1 || r.blk.block > 4096) bad(text, "block=" + kv["block"] + " (1..4096)");
    if (r.blk.rows < 1 || r.blk.rows > 4096) bad(text, "rows=" + kv["rows"] + " (1..4096)");
    if (kv.count("partial")) r.blk.partial = to_bool(text, "partial", kv["partial"]);
    return r;
  }
  bad(text, "unknown kind '" + family + "' (expected fp, fixed, bfp, mx or nvfp4)");
}

}  // namespace tb::num
