#pragma once
// Decimal text of binary floating-point values, for showing what a format holds.
#include <string>

namespace tb::num {

// The exact decimal expansion of `v` (every finite double has one: a binary fraction ends
// after as many decimal digits as it has binary ones), with no trailing zeros; "inf",
// "-inf", "nan", "-0".
std::string exact_decimal(double v);

// The shortest decimal text that reads back (strtof) as the same float32.
std::string shortest_float(float v);

}  // namespace tb::num
