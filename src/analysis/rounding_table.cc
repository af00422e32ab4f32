#include "analysis/rounding_table.h"

#include <fmt/format.h>

namespace tb {

std::string format_rounding(const std::vector<emu::ScalingSample>& points,
                            const std::string& indent) {
  if (points.empty()) return "";
  std::string out =
      indent + fmt::format("{:<6}  {:>10}  {:>12}  {:>12}  {:>8}  {:>11}  {}\n", "point", "values",
                           "beyond range", "flushed to 0", "NaN/Inf", "max |value|", "scales");
  auto pct = [](uint64_t n, uint64_t of) {
    return of ? fmt::format("{:.4f}%", 100.0 * double(n) / double(of)) : std::string("-");
  };
  for (const auto& p : points) {
    const std::string scales = p.scale_min == 1 && p.scale_max == 1
                                   ? "1"
                                   : fmt::format("{:.4g} .. {:.4g}", p.scale_min, p.scale_max) +
                                         (p.sites ? fmt::format(" ({} sites)", p.sites) : "");
    out +=
        indent + fmt::format("{:<6}  {:>10.3g}  {:>12}  {:>12}  {:>8}  {:>11.4g}  {}\n", p.point,
                             double(p.values), p.overflow_counted ? pct(p.overflow, p.values) : "-",
                             pct(p.underflow, p.values), p.nonfinite, p.amax, scales);
  }
  return out;
}

}  // namespace tb
