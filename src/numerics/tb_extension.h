/* The C interface of a trainbench number-format extension: a shared library, loaded by path
 * (`--unit ext:PATH`, quantization point `ext:PATH`, `--activation ext:PATH`), that defines a
 * number format by its operations, in the spirit of the divide-and-conquer paper's Listing 1.
 * Values of the format travel as uint32_t codes; the library decides what they mean.
 *
 * Required: tb_convert, tb_as_float, tb_add, tb_mul, tb_mad.
 * Optional: tb_name, and tb_activation with tb_activation_grad (both or neither).
 * Build:    c++ -shared -fPIC -O2 my_format.cc -o libmy_format.so
 */
#ifndef TB_EXTENSION_H
#define TB_EXTENSION_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t tb_value;

tb_value tb_convert(float f);                          /* float32 -> the format (rounding) */
float tb_as_float(tb_value v);                         /* the format -> float32 (exact)   */
tb_value tb_add(tb_value a, tb_value b);               /* a + b in the format             */
tb_value tb_mul(tb_value a, tb_value b);               /* a * b in the format             */
tb_value tb_mad(tb_value acc, tb_value a, tb_value b); /* acc + a * b, the MAD unit       */
const char* tb_name(void);                             /* optional */
float tb_activation(float x);                          /* optional, with its derivative:  */
float tb_activation_grad(float x);                     /* d tb_activation / dx at x       */

#ifdef __cplusplus
}
#endif
#endif
