// An incomplete extension for the tests: no tb_mul, no tb_mad, and an activation without its
// derivative.
#include "numerics/tb_extension.h"

extern "C" {
tb_value tb_convert(float f) { return tb_value(f); }
float tb_as_float(tb_value v) { return float(v); }
tb_value tb_add(tb_value a, tb_value b) { return a + b; }
float tb_activation(float x) { return x; }
}
