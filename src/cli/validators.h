#pragma once
// Numeric option checks for CLI11 options. CLI11's own (Range, PositiveNumber) let NaN through,
// since every comparison with NaN is false ("--budget nan" ran), print a positive number's
// range as 0 to a 309-digit DBL_MAX, and say "not in range" of a value that is not a number.
// Its unsigned conversion reads -1 as 2^64 - 1 and clamps what does not fit. The two that pass
// their text on canonical are added with ->transform(): ->check() makes a validator
// non-modifying.
#include <CLI/CLI.hpp>

namespace tb::cli {

// A finite number in [lo, hi]; written in plain digits, it is passed on in canonical decimal
// (no leading zeros, which CLI11's conversion would take for octal).
CLI::Validator number_in(double lo, double hi);
// A finite number above 0.
CLI::Validator positive_number();
// A whole number from 0 to 2^64 - 1, in decimal digits (passed on canonical, as above).
CLI::Validator unsigned_integer();

}  // namespace tb::cli
