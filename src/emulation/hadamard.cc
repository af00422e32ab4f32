#include "emulation/hadamard.h"

#include "emulation/emulate.h"
#include "numerics/quantize.h"

namespace tb::emu {

torch::Tensor random_hadamard(int64_t n, uint64_t seed) {
  torch::Tensor h = torch::ones({1, 1});
  for (int64_t m = 1; m < n; m *= 2)  // Sylvester: [[H, H], [H, -H]]
    h = torch::cat({torch::cat({h, h}, 1), torch::cat({h, -h}, 1)}, 0);
  // The signs from the library's counter-based generator: the same for a seed on any machine.
  torch::Tensor d = torch::empty({n});
  for (int64_t i = 0; i < n; ++i) d[i] = (num::random_bits(seed, uint64_t(i)) & 1u) ? -1.0f : 1.0f;
  return h * d.unsqueeze(0) / std::sqrt(double(n));
}

torch::Tensor hadamard_rows(const torch::Tensor& x, const torch::Tensor& t) {
  const int64_t n = t.size(0), rows = x.size(0), whole = rows / n * n;
  if (whole == 0) return x;
  const torch::Tensor blocks = torch::matmul(t, x.slice(0, 0, whole).reshape({whole / n, n, -1}));
  if (whole == rows) return blocks.reshape({rows, -1});
  return torch::cat({blocks.reshape({whole, -1}), x.slice(0, whole)}, 0);
}

namespace {

struct RhtLinear : public torch::autograd::Function<RhtLinear> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               torch::Tensor w, torch::Tensor b, const Policy* p, int64_t layer) {
    ctx->saved_data["policy"] = reinterpret_cast<int64_t>(p);
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["bias"] = b.numel() > 0;
    ctx->save_for_backward({x, w});
    const torch::Tensor xq = p->at(1, int(layer)).apply(x);
    return torch::nn::functional::linear(xq, w, b.numel() > 0 ? b : torch::Tensor());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* p = reinterpret_cast<const Policy*>(ctx->saved_data["policy"].toInt());
    const int layer = int(ctx->saved_data["layer"].toInt());
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor dy = grads[0].reshape({-1, w.size(0)});
    const torch::Tensor x2 = x.reshape({-1, w.size(1)});
    const QuantPoint& errors = p->at(2, layer);
    const QuantPoint& acts = p->at(1, layer);
    const torch::Tensor dx = torch::mm(errors.apply(dy), w).reshape(x.sizes());
    const torch::Tensor t = random_hadamard(p->rht_size, p->rht_seed);
    // Rounded along the batch, dW's reduction dimension, as a block-scaled GEMM reads them (and
    // as the transform's blocks of rows run).
    const torch::Tensor dyt = hadamard_rows(dy, t).t().contiguous();
    const torch::Tensor xt = hadamard_rows(x2, t).t().contiguous();
    const torch::Tensor dw = torch::mm(errors.apply(dyt), acts.apply(xt).t());
    const torch::Tensor db = ctx->saved_data["bias"].toBool() ? dy.sum(0) : torch::Tensor();
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rht_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const Policy& p, int layer) {
  // No bias travels as an empty tensor: autograd functions take no undefined inputs.
  return RhtLinear::apply(x, w, b.defined() ? b : torch::empty({0}), &p, int64_t(layer));
}

}  // namespace tb::emu
