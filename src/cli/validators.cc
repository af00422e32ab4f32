#include "cli/validators.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "spec/printable.h"

namespace tb::cli {
namespace {

// The whole text as a number (strtod: decimal, exponent, inf, nan), or none.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

CLI::Validator number_in(double lo, double hi) {
  const std::string range = fmt::format("[{:g}, {:g}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const auto v = number(text);
        if (!v || !std::isfinite(*v) || *v < lo || *v > hi)
          return fmt::format("'{}' is not a number in {}", printable(text), range);
        // A whole number in decimal digits (an integer option's) loses its leading zeros:
        // CLI11 would read 010 as octal 8.
        if (text.find_first_not_of("0123456789") == std::string::npos)
          text = std::to_string(static_cast<unsigned long long>(*v));
        return {};
      },
      "a number in " + range);
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto v = number(text);
        if (!v || !std::isfinite(*v) || !(*v > 0))
          return fmt::format("'{}' is not a positive number", printable(text));
        return {};
      },
      "a positive number");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE)
          return fmt::format("'{}' is not a whole number from 0 to 18446744073709551615",
                             printable(text));
        // CLI11 converts with base 0: 010 would be octal 8, 08 refused. Decimal, as printed.
        text = std::to_string(v);
        return {};
      },
      "a whole number");
}

}  // namespace tb::cli
