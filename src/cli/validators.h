#pragma once
// Numeric option checks for CLI11 options. CLI11's own (Range, PositiveNumber) let NaN through,
// since every comparison with NaN is false ("--budget nan" ran), print a positive number's
// range as 0 to a 309-digit DBL_MAX, and say "not in range" of a value that is not a number.
// Its unsigned conversion reads -1 as 2^64 - 1 and clamps what does not fit.
#include <CLI/CLI.hpp>

namespace tb::cli {

// A finite number in [lo, hi].
CLI::Validator number_in(double lo, double hi);
// A finite number above 0.
CLI::Validator positive_number();
// A whole number from 0 to 2^64 - 1, in decimal digits.
CLI::Validator unsigned_integer();

}  // namespace tb::cli
