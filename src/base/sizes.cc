#include "base/sizes.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "base/errors.h"

namespace tb {

double parse_bytes(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError(flag + " " + text + ": not a size (e.g. 8GiB, 512MiB, 2e9)");
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::map<std::string, double> units = {{"", 1},
                                                      {"B", 1},
                                                      {"K", 1024},
                                                      {"KiB", 1024},
                                                      {"KB", 1e3},
                                                      {"M", 1 << 20},
                                                      {"MiB", 1 << 20},
                                                      {"MB", 1e6},
                                                      {"G", 1 << 30},
                                                      {"GiB", 1 << 30},
                                                      {"GB", 1e9},
                                                      {"T", 1099511627776.0},
                                                      {"TiB", 1099511627776.0},
                                                      {"TB", 1e12}};
  const auto it = units.find(unit);
  if (it == units.end() || !(v > 0) || !std::isfinite(v))
    throw UsageError(flag + " " + text + ": not a positive size (e.g. 8GiB, 512MiB, 2e9)");
  return v * it->second;
}

std::string bytes_iec(double b) {
  const char* prefixes[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (std::fabs(b) >= 1024 && i < 5) b /= 1024, ++i;
  const double a = std::fabs(b);
  if (i == 0 || a >= 100 || a == 0) return fmt::format("{:.0f} {}", b, prefixes[i]);
  return fmt::format(a >= 10 ? "{:.1f} {}" : "{:.2f} {}", b, prefixes[i]);
}

}  // namespace tb
