// A complete number-format extension for the tests: bfloat16 (round to nearest even), every
// operation rounded once; a hard tanh activation.
#include <cstring>

#include "numerics/tb_extension.h"

namespace {
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

extern "C" {
tb_value tb_convert(float f) {
  const uint32_t u = bits(f);
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;  // finite inputs only, as the tests use
}
float tb_as_float(tb_value v) {
  const uint32_t u = v << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
tb_value tb_add(tb_value a, tb_value b) { return tb_convert(tb_as_float(a) + tb_as_float(b)); }
tb_value tb_mul(tb_value a, tb_value b) { return tb_convert(tb_as_float(a) * tb_as_float(b)); }
tb_value tb_mad(tb_value acc, tb_value a, tb_value b) {
  return tb_convert(tb_as_float(acc) + tb_as_float(a) * tb_as_float(b));
}
const char* tb_name(void) { return "test-bf16"; }
float tb_activation(float x) { return x < -1 ? -1 : x > 1 ? 1 : x; }
float tb_activation_grad(float x) { return x < -1 || x > 1 ? 0.0f : 1.0f; }
}
