#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "base/errors.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "numerics/decimal.h"
#include "numerics/format.h"
#include "numerics/quantize.h"
#include "numerics/scaling.h"
#include "record/context.h"
#include "record/json.h"

namespace tb::cli {
namespace {

std::string binary(uint64_t code, int width) {
  std::string s;
  for (int i = width - 1; i >= 0; --i) s += ((code >> i) & 1) ? '1' : '0';
  return s;
}

// Sign, exponent and mantissa fields apart, as the OCP tables write them.
std::string float_fields(const num::FloatFormat& f, int64_t code) {
  if (code < 0) return "(no encoding)";
  const uint64_t c = uint64_t(code);
  return fmt::format("{} {} {}", (c >> (f.exp_bits + f.man_bits)) & 1,
                     binary(c >> f.man_bits, f.exp_bits),
                     f.man_bits ? binary(c, f.man_bits) : std::string("-"));
}

std::string hex(int64_t code, int bits) {
  if (code < 0) return "-";
  return fmt::format("0x{:0{}x}", code, (bits + 3) / 4);
}

// A value as the table shows it: exact when that fits the column, else the shortest text
// that reads back as the same float32, marked "~" (--json carries the exact value).
std::string value(double v, bool* shortened = nullptr) {
  const std::string exact = num::exact_decimal(v);
  if (exact.size() <= 16) return exact;
  if (shortened) *shortened = true;
  return num::shortest_float(float(v)) + "~";
}

std::string relative_error(double x, double q) {
  if (!std::isfinite(x) || !std::isfinite(q) || x == 0) return "";
  return fmt::format("{:+.3g}%", 100.0 * (q - x) / std::fabs(x));
}

float parse_value(const std::string& text) {
  const char* s = text.c_str();
  char* end = nullptr;
  const float v = std::strtof(s, &end);
  if (end == s || *end != '\0') throw UsageError("value '" + text + "' is not a number");
  // A finite number past float32's range would read as Inf: "inf" is written as such.
  if (std::isinf(v) && text.find_first_of("iI") == std::string::npos)
    throw UsageError("value '" + text +
                     "' is beyond float32's range (its largest is 3.4028235e38; write inf for "
                     "infinity)");
  return v;
}

std::string specials(const num::FloatFormat& f) {
  switch (f.special) {
    case num::Special::kIeee:
      return "Inf, NaN, -0";
    case num::Special::kFn:
      return "NaN (one code), -0, no Inf";
    case num::Special::kFnuz:
      return "NaN (0x80..), no Inf, no -0";
    case num::Special::kNone:
      return "none (all finite)";
  }
  return "";
}

const char* kShortenedNote =
    "~ shortest text that reads back as the same float32; the exact value: --json\n";

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json relative_error_json(double x, double q) {
  return std::isfinite(x) && std::isfinite(q) && x != 0 ? nlohmann::json((q - x) / std::fabs(x))
                                                        : nlohmann::json(nullptr);
}

std::string counts_text(const num::RangeCounts& c) {
  return fmt::format("{} beyond the largest value, {} nonzero to zero{}", c.overflow, c.underflow,
                     c.nonfinite ? fmt::format(", {} NaN or Inf", c.nonfinite) : "");
}

nlohmann::json counts_json(const num::RangeCounts& c) {
  return {{"values", c.values},
          {"overflow", c.overflow},
          {"underflow", c.underflow},
          {"nonfinite", c.nonfinite}};
}

// `quantize --format FORMAT@RECIPE`: the values as one row of a tensor a point with that
// recipe rounds (num::scale_row), beside the same format unscaled (the point without the
// recipe: the format's own overflow rule).
int quantize_scaled(const std::string& text, const std::vector<float>& xs,
                    const num::QuantOptions& o, bool json) {
  const auto at = text.find('@');
  const num::Format plain = num::parse_format(text.substr(0, at));
  const num::Scaling sc = num::parse_scaling(text.substr(at + 1), plain, text.substr(0, at));
  const num::Format f = num::saturating(plain);
  const num::ScaledRow r = num::scale_row(f, sc, xs, o);
  const std::vector<float> unscaled = num::quantize(plain, xs, o);
  const num::RangeCounts with =
      num::count_range(r.scaled.data(), r.rounded.data(), xs.size(), num::overflow_threshold(f));
  const num::RangeCounts without =
      num::count_range(xs.data(), unscaled.data(), xs.size(), num::overflow_threshold(plain));
  if (json) {
    nlohmann::json tiles = nlohmann::json::array(), values = nlohmann::json::array();
    for (const auto& t : r.tiles)
      tiles.push_back({{"first", t.first},
                       {"count", t.count},
                       {"amax", finite_or_null(t.amax)},
                       {"scale", finite_or_null(t.scale)}});
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t code = num::encode(f, r.rounded[i]);
      values.push_back({{"input", finite_or_null(xs[i])},
                        {"input_exact", num::exact_decimal(xs[i])},
                        {"scaled", finite_or_null(r.scaled[i])},
                        {"scaled_rounded", finite_or_null(r.rounded[i])},
                        {"code", code < 0 ? nlohmann::json(nullptr) : nlohmann::json(code)},
                        {"quantized", finite_or_null(r.out[i])},
                        {"quantized_exact", num::exact_decimal(r.out[i])},
                        {"quantized_shortest", num::shortest_float(r.out[i])},
                        {"relative_error", relative_error_json(xs[i], r.out[i])},
                        {"unscaled", finite_or_null(unscaled[i])},
                        {"unscaled_relative_error", relative_error_json(xs[i], unscaled[i])}});
    }
    std::cout << document("trainbench.quantize",
                          {{"format", f.str()},
                           {"unscaled_format", plain.str()},
                           {"scaling", {{"recipe", sc.str()}, {"tiles", tiles}}},
                           {"rounding", num::rounding_name(o.rounding)},
                           {"seed", o.seed},
                           {"values", values},
                           {"counts",
                            {{"scaled", counts_json(with)}, {"unscaled", counts_json(without)}}}})
                     .dump(2)
              << "\n";
    return 0;
  }
  bool shortened = false;
  std::cout << fmt::format(
      "format {} saturating, as a scaled point rounds it = {}, rounding {}, "
      "scaling {}\n",
      plain.display_name(), f.str(), num::rounding_name(o.rounding), sc.str());
  const double max = num::scaling_max(f);
  for (size_t k = 0; k < r.tiles.size(); ++k) {
    const auto& t = r.tiles[k];
    const std::string where = r.tiles.size() == 1 ? "all values"
                                                  : fmt::format("tile {} (values {}-{})", k,
                                                                t.first, t.first + t.count - 1);
    // How the recipe arrived at the scale (numerics/scaling.h).
    std::string how;
    if (!(t.amax > 0) || !std::isfinite(t.amax))
      how = "1 where the amax is 0, Inf or NaN";
    else if (t.scale == std::numeric_limits<float>::max())
      how = "the largest float32: max / amax overflows";
    else
      how = fmt::format("{} / amax{}{}", num::shortest_float(float(max)),
                        sc.margin ? fmt::format(" / 2^{}", sc.margin) : "",
                        sc.pow2 ? ", rounded down to a power of two" : "");
    std::cout << fmt::format("{}: amax {}, scale {} ({})\n", where, num::shortest_float(t.amax),
                             num::shortest_float(t.scale), how);
  }
  const int bits = f.kind == num::Format::Kind::kFloat ? f.fp.bits() : f.fx.word_bits;
  const std::string unscaled_head = "unscaled (" + plain.display_name() + ")";
  std::cout << fmt::format("{:>16}  {:<16} {:<{}} {:<{}} {:<16} {:<11} {:<16} {}\n", "value",
                           "scaled", "bits", std::max(bits + 2, 4), "hex", (bits + 3) / 4 + 2,
                           "quantized", "rel. error", unscaled_head, "rel. error");
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t code = num::encode(f, r.rounded[i]);
    const std::string fields = f.kind == num::Format::Kind::kFloat
                                   ? float_fields(f.fp, code)
                                   : (code < 0 ? "(no encoding)" : binary(code, bits));
    std::cout << fmt::format("{:>16}  {:<16} {:<{}} {:<{}} {:<16} {:<11} {:<16} {}\n",
                             value(xs[i], &shortened), value(r.scaled[i], &shortened), fields,
                             std::max(bits + 2, 4), hex(code, bits), (bits + 3) / 4 + 2,
                             value(r.out[i], &shortened), relative_error(xs[i], r.out[i]),
                             value(unscaled[i], &shortened), relative_error(xs[i], unscaled[i]));
  }
  std::cout << fmt::format("of {} values, scaled: {}; unscaled: {}\n", xs.size(), counts_text(with),
                           counts_text(without));
  if (shortened) std::cout << kShortenedNote;
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  struct Args {
    std::string format, rounding = "nearest-even";
    uint64_t seed = 0;
    bool json = false;
    std::vector<std::string> values;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "quantize", "Round values to a number format: each value's result and bit pattern");
  sub->add_option("--format,-f", a->format,
                  "preset (see `trainbench formats`) or descriptor, with a scaling recipe "
                  "after @ (current[:M], block:1xC[:pow2])")
      ->required();
  sub->add_option("--rounding,-r", a->rounding,
                  "nearest-even | ties-away | toward-zero | stochastic");
  sub->add_option("--seed", a->seed, "stochastic rounding seed (reproducible)")
      ->transform(unsigned_integer());
  sub->add_flag("--json", a->json,
                "print a JSON document: every value exactly, as text, beside the number");
  sub->add_option("values", a->values, "float32 values (inf, nan and hex floats accepted)");
  sub->footer(
      "Block formats (mx:..., bfp:..., nvfp4) take the values as one row of blocks and print\n"
      "each block's shared exponent (NVFP4: the tensor's decode scale and each block's E4M3\n"
      "scale). Negative values: put `--` before the first value; everything\n"
      "after it is a value (`-- 448 -450`; `448 -- -450` is refused). Values are printed\n"
      "exactly where they fit the column, else as the shortest text that reads back as the same\n"
      "float32, marked ~; --json gives every value exactly.\n"
      "FORMAT@RECIPE rounds the values as one row of a tensor that a point with that recipe\n"
      "rounds (docs/numerics.md, \"Scaling recipes\"): each tile's amax and scale, each value\n"
      "scaled, its code, the value kept (the code over the scale), and beside it the format\n"
      "unscaled; a recipe clips what it scales past the largest value. Delayed scaling needs\n"
      "earlier steps (trainbench emulate).\n"
      "Examples:\n"
      "  trainbench quantize --format e4m3 3.3 448 464 500 1e-3\n"
      "  trainbench quantize --format bf16 --rounding toward-zero 3.14159265\n"
      "  trainbench quantize --format fp:e=4,m=3,special=fn,overflow=sat -- 1000 -0.07\n"
      "  trainbench quantize --format fixed:w=8,f=4 --rounding stochastic --seed 1 0.1 0.1\n"
      "  trainbench quantize --format mxfp4_e2m1 0.1 0.2 3 5\n"
      "  trainbench quantize --format e4m3 --json -- 448 -450\n"
      "  trainbench quantize --format e4m3@current -- 1000 -3.5 0.01 0.0001\n"
      "  trainbench quantize --format e4m3@block:1x2 -- 1000 -3.5 0.01 0.0001");
  return {
      sub, [a, sub]() {
        // The runtime flushes denormals; here float32 subnormals are values to show, not noise.
        at::globalContext().setFlushDenormal(false);
        const bool scaled = a->format.find('@') != std::string::npos;
        const num::Format f = num::parse_format(a->format.substr(0, a->format.find('@')));
        num::QuantOptions o;
        o.rounding = num::parse_rounding(a->rounding);
        if (sub->count("--seed") && o.rounding != num::Rounding::kStochastic)
          throw UsageError("--seed " + std::to_string(a->seed) +
                           ": only stochastic rounding "
                           "draws random bits (--rounding stochastic)");
        o.seed = a->seed;
        const std::vector<std::string>& texts = a->values;
        if (texts.empty()) throw UsageError("quantize: give one or more values to round");
        std::vector<float> xs;
        for (const auto& v : texts) xs.push_back(parse_value(v));
        if (scaled) return quantize_scaled(a->format, xs, o, a->json);
        const std::vector<float> qs = num::quantize(f, xs, o);
        if (a->json) {
          nlohmann::json values = nlohmann::json::array();
          for (size_t i = 0; i < xs.size(); ++i) {
            const int64_t code = f.kind == num::Format::Kind::kBlock ? -1 : num::encode(f, qs[i]);
            const double q = qs[i];
            values.push_back(
                {{"input",
                  std::isfinite(xs[i]) ? nlohmann::json(double(xs[i])) : nlohmann::json(nullptr)},
                 {"input_exact", num::exact_decimal(xs[i])},
                 {"quantized", std::isfinite(q) ? nlohmann::json(q) : nlohmann::json(nullptr)},
                 {"quantized_exact", num::exact_decimal(q)},
                 {"quantized_shortest", num::shortest_float(qs[i])},
                 {"code", code < 0 ? nlohmann::json(nullptr) : nlohmann::json(code)},
                 {"relative_error", std::isfinite(xs[i]) && std::isfinite(q) && xs[i] != 0
                                        ? nlohmann::json((q - xs[i]) / std::fabs(double(xs[i])))
                                        : nlohmann::json(nullptr)}});
          }
          std::cout << document("trainbench.quantize",
                                {{"format", f.str()},
                                 {"rounding", num::rounding_name(o.rounding)},
                                 {"seed", o.seed},
                                 {"values", values}})
                           .dump(2)
                    << "\n";
          return 0;
        }
        bool shortened = false;
        std::cout << fmt::format("format {}{}, rounding {}\n", f.name.empty() ? "" : f.name + " = ",
                                 f.str(), num::rounding_name(o.rounding));
        if (f.kind == num::Format::Kind::kBlock) {
          const size_t b = size_t(f.blk.block);
          // NVFP4's two levels, from the library as its rounding takes them.
          const bool nvfp4 = f.blk.kind == num::BlockFormat::Kind::kNvfp4;
          const num::Nvfp4Scales scales =
              nvfp4 ? num::nvfp4_scales(xs.data(), xs.size()) : num::Nvfp4Scales{};
          if (nvfp4) {
            const float amax = num::tensor_amax(xs.data(), xs.size());
            std::cout << fmt::format(
                "tensor amax {}, decode scale {} ({})\n", value(amax, &shortened),
                value(scales.tensor_decode, &shortened),
                amax == 0 || !std::isfinite(amax) ? "1: the amax is 0 or infinite"
                                                  : "amax / (448 x 6)");
          }
          for (size_t i0 = 0; i0 < xs.size(); i0 += b) {
            const size_t len = std::min(b, xs.size() - i0);
            const int e = num::block_exponent(f.blk, xs.data() + i0, len);
            if (f.blk.kind == num::BlockFormat::Kind::kMx)
              std::cout << fmt::format("block {}: E8M0 scale {}\n", i0 / b,
                                       e == 255 ? std::string("NaN (0xff)")
                                                : fmt::format("2^{} (0x{:02x})", e - 127, e));
            else if (f.blk.kind == num::BlockFormat::Kind::kBfp)
              std::cout << fmt::format("block {}: shared exponent {}\n", i0 / b, e);
            else  // NVFP4: an E4M3 block scale under the float32 tensor scale
              std::cout << fmt::format("block {}: amax {}, E4M3 scale {}\n", i0 / b,
                                       value(scales.block_amax[i0 / b], &shortened),
                                       value(scales.block_scale[i0 / b], &shortened));
            for (size_t i = i0; i < i0 + len; ++i)
              std::cout << fmt::format("  {:>16} -> {:<16} {}\n", value(xs[i], &shortened),
                                       value(qs[i], &shortened), relative_error(xs[i], qs[i]));
          }
          if (shortened) std::cout << kShortenedNote;
          return 0;
        }
        const int bits = f.kind == num::Format::Kind::kFloat ? f.fp.bits() : f.fx.word_bits;
        std::cout << fmt::format("{:>16}  {:<16} {:<{}} {:<{}} {}\n", "value", "quantized", "bits",
                                 std::max(bits + 2, 4), "hex", (bits + 3) / 4 + 2, "rel. error");
        for (size_t i = 0; i < xs.size(); ++i) {
          const int64_t code = num::encode(f, qs[i]);
          const std::string fields = f.kind == num::Format::Kind::kFloat
                                         ? float_fields(f.fp, code)
                                         : (code < 0 ? "(no encoding)" : binary(code, bits));
          std::cout << fmt::format("{:>16}  {:<16} {:<{}} {:<{}} {}\n", value(xs[i], &shortened),
                                   value(qs[i], &shortened), fields, std::max(bits + 2, 4),
                                   hex(code, bits), (bits + 3) / 4 + 2,
                                   relative_error(xs[i], qs[i]));
        }
        if (shortened) std::cout << kShortenedNote;
        return 0;
      }};
}

namespace {
// A grid's largest value for the formats table: 5 significant digits unless they state more
// than the value (q8.8's, 127.99609375, read as 128, a value the format cannot hold), then as
// many as it takes not to.
std::string largest_value(double v) {
  for (const int digits : {5, 9, 17}) {
    const std::string text = fmt::format("{:.{}g}", v, digits);
    if (std::fabs(std::strtod(text.c_str(), nullptr)) <= std::fabs(v)) return text;
  }
  return fmt::format("{}", v);
}
}  // namespace

Command add_formats(CLI::App& app) {
  auto* sub = app.add_subcommand("formats", "List the number-format presets: range, precision");
  sub->footer(
      "Any format can also be described: eXmY (IEEE conventions), fp:e=,m=[,bias=][,sub=on|off]\n"
      "[,special=ieee|fn|fnuz|none][,overflow=sat|inf|nan], fixed:w=,f=[,signed=][,sat=],\n"
      "bfp:block=,m=[,e=], mx:elem=e4m3|e5m2|e3m4|e2m3|e3m2|e2m1|int8[,block=]. docs/numerics.md\n"
      "Examples:\n"
      "  trainbench formats\n"
      "  trainbench quantize --format e5m2 57344 61440");
  return {sub, []() {
            std::cout << fmt::format("{:<12} {:>5} {:>13} {:>13} {:>13} {:>9}  {:<27} {}\n", "name",
                                     "bits", "max", "min normal", "min subnorm", "epsilon",
                                     "special values", "descriptor");
            for (const auto& p : num::format_presets()) {
              const num::Format f = num::parse_format(p.name);
              const std::string bits = fmt::format("{:g}", f.bits_per_element());
              if (f.kind == num::Format::Kind::kFloat) {
                const auto& fp = f.fp;
                std::cout << fmt::format("{:<12} {:>5} {:>13} {:>13} {:>13} {:>9.3g}  {:<27} {}\n",
                                         p.name, bits, largest_value(fp.max_finite()),
                                         fmt::format("{:.5g}", fp.min_normal()),
                                         fmt::format("{:.5g}", fp.min_subnormal()),
                                         std::ldexp(1.0, -fp.man_bits), specials(fp), f.str());
              } else if (f.kind == num::Format::Kind::kFixed) {
                std::cout << fmt::format(
                    "{:<12} {:>5} {:>13} {:>13} {:>13} {:>9.3g}  {:<27} {}\n", p.name, bits,
                    f.fx.max_value(), "-", std::ldexp(1.0, -f.fx.frac_bits),
                    std::ldexp(1.0, -f.fx.frac_bits), "none (saturates)", f.str());
              } else {
                // What a NaN or Inf does to its block: MX's shared scale becomes NaN (every
                // element NaN); NVFP4 and BFP keep a NaN element and saturate an Inf.
                const bool mx = f.blk.kind == num::BlockFormat::Kind::kMx;
                std::cout << fmt::format(
                    "{:<12} {:>5} {:>13} {:>13} {:>13} {:>9}  {:<27} {}\n", p.name, bits, "-", "-",
                    "-", "-", mx ? "NaN scale (MX)" : "NaN kept, Inf saturates", f.str());
              }
              std::cout << fmt::format("{:<12} {}\n", "", p.summary);
            }
            return 0;
          }};
}

}  // namespace tb::cli
