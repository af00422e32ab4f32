#pragma once
// Analytic cost of one operator call as the profiler records it: a name and the shapes
// and dtypes of its inputs (outputs are not recorded). The conventions are the cost
// model's (docs/cost-model.md): FLOP = 2 x MAC, a bias or scaled add counts one FLOP per
// element, comparisons count. Bytes are the inputs read plus the output written, each
// once. Used to give every profiled operator FLOPs, bytes and a class.
#include <cstdint>
#include <string>
#include <vector>

namespace tb::cost {

struct OpCost {
  double flops = 0;  // 0: no arithmetic of its own, or an op the table does not know
  double bytes = 0;
  bool known = false;  // the op is in the table (its FLOPs are meant, even when 0)
};

// Size in bytes of a dtype as the profiler names it ("float", "c10::BFloat16",
// "long int", ...); 0 when unknown.
int64_t profiler_dtype_bytes(const std::string& dtype);

// Which gradients a convolution's backward computes is its output_mask, which LibTorch
// 1.13's profiler does not record; the caller knows it from the context:
// `no_grad_shapes`: shapes of the tensors known to need no gradient (the model's input
// batch). A backward whose input has one of them computes no input gradient (autograd passes
// output_mask[0] = input.requires_grad). `weight_gradients` false: the backward belongs to a
// gradient taken with respect to inputs only (torch::autograd::grad in the forward phase, as
// WGAN-GP's penalty), which computes no weight gradient.
OpCost op_cost(const std::string& name, const std::vector<std::vector<int64_t>>& shapes,
               const std::vector<std::string>& dtypes,
               const std::vector<std::vector<int64_t>>& no_grad_shapes = {},
               bool weight_gradients = true);

// The class an operator belongs to, for time breakdowns: matmul, conv, normalization,
// pooling, elementwise, reduction, softmax-loss, rnn, embedding, memory, autograd, other.
std::string op_class(const std::string& name);

}  // namespace tb::cost
