#include "numerics/decimal.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tb::num {

std::string exact_decimal(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const uint64_t mant = uint64_t(std::ldexp(m, 53));
  const int lowest_one = e - 53 + __builtin_ctzll(mant);  // |v| is a multiple of 2^lowest_one
  const int digits = lowest_one < 0 ? -lowest_one : 0;
  // glibc's printf converts exactly at any precision.
  const int n = std::snprintf(nullptr, 0, "%.*f", digits, v);
  std::string out(size_t(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), "%.*f", digits, v);
  out.resize(size_t(n));
  return out;
}

std::string shortest_float(float v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace tb::num
