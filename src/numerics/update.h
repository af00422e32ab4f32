#pragma once
// The element arithmetic of a momentum-SGD step on float32 arrays, as LibTorch computes it, so
// that the emulation can run the update in the same pass as the rounding of the optimizer state
// and the master weights (emulation/fused_update.h) and get the values the unfused sequence
// gets, bit for bit. What LibTorch 1.13 computes was read from ATen's kernels and is checked
// against it in the tests: `t.mul_(s)` and `t.add_(u)` (alpha 1) round each product and sum on
// its own; `t.add_(u, alpha)` is one fused multiply-add, t + alpha * u rounded once (ATen's
// vectorised loop calls fmadd, and its scalar remainder compiles to an FMA too).
#include <cstddef>
#include <cstdint>

namespace tb::num {

// buf = buf * momentum + g: torch::optim::SGD's `buf.mul_(momentum).add_(g, 1 - 0)`.
void momentum_buffer(float* buf, const float* g, size_t n, float momentum);

// p = p + alpha * v in one rounding: `p.add_(v, alpha)` (SGD's step with alpha = -lr).
void add_scaled(float* p, const float* v, size_t n, float alpha);

// p = p - v * lr in two roundings: `p.sub_(v * lr)`.
void sub_product(float* p, const float* v, size_t n, float lr);

// momentum_buffer(buf, g, n, momentum) then add_scaled(p, buf, n, alpha) in one loop, with the
// largest |x| bits of the new buf and p (NaN counted as 0, as quantize's amax passes count it)
// folded into *amax_buf and *amax_p: the fused torch-SGD step's pass (emulation/fused_update.cc),
// which reads each chunk once where the loops apart (and NVFP4's amax passes) read it again.
void momentum_add_amax(float* p, float* buf, const float* g, size_t n, float momentum, float alpha,
                       uint32_t* amax_buf, uint32_t* amax_p);

// momentum_buffer and sub_product with the largest |x| bits of what they write (NaN counted as 0)
// folded into *amax: the fused update's passes for the rule that rounds the state before the
// parameter reads it (emulation/fused_update.cc), where NVFP4's roundings need the tensor's
// amax and a pass of its own over each chunk took it again.
void momentum_buffer_amax(float* buf, const float* g, size_t n, float momentum, uint32_t* amax);
void sub_product_amax(float* p, const float* v, size_t n, float lr, uint32_t* amax);

}  // namespace tb::num
