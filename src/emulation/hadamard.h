#pragma once
// The random Hadamard transform of the NVFP4 training recipe: the two inputs of a Linear
// layer's weight-gradient GEMM, dW = dY^T X, are each multiplied along their rows (the batch,
// the GEMM's reduction dimension) by T = H D / sqrt(N) block by block, H the N x N Sylvester
// Hadamard matrix and D a seeded random diagonal of signs, and only then rounded. T is
// orthogonal, so (T dY)^T (T X) = dY^T X in exact arithmetic: what changes is what rounding
// sees (outliers spread over N values). Rows past the last whole block of N are left as they
// are (the product is still unchanged).
#include <torch/torch.h>

#include <cstdint>

namespace tb::emu {

struct Policy;

// T for size n (a power of two) and seed, [n, n] float32.
torch::Tensor random_hadamard(int64_t n, uint64_t seed);

// T applied to each block of n rows of x [rows, columns].
torch::Tensor hadamard_rows(const torch::Tensor& x, const torch::Tensor& t);

// hadamard_rows(x, t).t(), contiguous: the layout dW's inputs are rounded in. One transposing
// copy of x and one matrix product, where transforming first and transposing after takes
// three copies (the batched product's own and the transpose).
torch::Tensor hadamard_rows_t(const torch::Tensor& x, const torch::Tensor& t);

// y = x W^T + b as Transformer Engine's Linear runs it, every GEMM input rounded at the
// policy's points of `layer` (Policy::at): forward x at the activations' point (W is rounded by
// the caller, as the weights' point does for every forward pass); backward dY at the errors'
// point for dX = dY W, and for dW = dY^T X both dY and x through the policy's random Hadamard
// transform, then rounded at the errors' and activations' points along the batch (dW's
// reduction dimension: a block format's blocks run along it, as block-scaled GEMMs need).
// x: [..., in]; b may be
// undefined. The policy must outlive the graph.
torch::Tensor rht_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const Policy& p, int layer);

}  // namespace tb::emu
