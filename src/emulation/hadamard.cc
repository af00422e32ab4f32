#include "emulation/hadamard.h"

#include <cmath>
#include <vector>

#include "base/errors.h"
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

torch::Tensor hadamard_rows_t(const torch::Tensor& x, const torch::Tensor& t) {
  const int64_t n = t.size(0), rows = x.size(0), cols = x.size(1), whole = rows / n * n;
  if (whole != rows || whole == 0 || x.scalar_type() != torch::kFloat || !x.device().is_cpu() ||
      t.scalar_type() != torch::kFloat)
    return hadamard_rows(x, t).t().contiguous();
  // T = H D / sqrt(n): D's signs are T's first row times sqrt(n) (H's first row is all ones).
  const torch::Tensor tc = t.contiguous();
  const float* tp = tc.data_ptr<float>();
  std::vector<float> signs(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) signs[size_t(k)] = tp[k] > 0 ? 1.0f : -1.0f;
  const float norm = 1.0f / std::sqrt(float(n));
  const torch::Tensor xc = x.contiguous();
  const float* in = xc.data_ptr<float>();
  torch::Tensor out = torch::empty({cols, rows});
  float* o = out.data_ptr<float>();
  // A block of n rows at a time: signs, then the fast Walsh-Hadamard butterflies over whole
  // rows (Sylvester's order, as random_hadamard builds H), then written transposed: each column
  // of the block is n consecutive values of the output's row.
  std::vector<float> buf(size_t(n * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += n) {
    for (int64_t k = 0; k < n; ++k) {
      const float* src = in + (r0 + k) * cols;
      float* dst = buf.data() + k * cols;
      const float s = signs[size_t(k)];
      for (int64_t c = 0; c < cols; ++c) dst[c] = src[c] * s;
    }
    for (int64_t h = 1; h < n; h *= 2)
      for (int64_t i = 0; i < n; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          float* a = buf.data() + j * cols;
          float* b = buf.data() + (j + h) * cols;
          for (int64_t c = 0; c < cols; ++c) {
            const float u = a[c], v = b[c];
            a[c] = u + v;
            b[c] = u - v;
          }
        }
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t k = 0; k < n; ++k) o[c * rows + r0 + k] = buf[size_t(k * cols + c)] * norm;
  }
  return out;
}

namespace {

// T for the policy's size and seed, built once per thread (a step calls it for every layer).
const torch::Tensor& cached_hadamard(int64_t n, uint64_t seed) {
  thread_local int64_t size = -1;
  thread_local uint64_t key = 0;
  thread_local torch::Tensor t;
  if (size != n || key != seed || !t.defined()) {
    t = random_hadamard(n, seed);
    size = n;
    key = seed;
  }
  return t;
}

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
    const torch::Tensor& t = cached_hadamard(p->rht_size, p->rht_seed);
    // Rounded along the batch, dW's reduction dimension, as a block-scaled GEMM reads them (and
    // as the transform's blocks of rows run).
    const torch::Tensor dyt = hadamard_rows_t(dy, t);
    const torch::Tensor xt = hadamard_rows_t(x2, t);
    const torch::Tensor dw = torch::mm(errors.apply(dyt), acts.apply(xt).t());
    const torch::Tensor db = ctx->saved_data["bias"].toBool() ? dy.sum(0) : torch::Tensor();
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rht_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const Policy& p, int layer) {
  // A training step whose weight-gradient GEMM has fewer rows than one block would be
  // transformed nowhere
  // (hadamard_rows leaves rows past the last whole block alone): a setting that does nothing
  // is an error, not a silent no-op. Evaluation (no gradient) transforms nothing anyway.
  const int64_t rows = x.dim() > 0 && x.size(-1) > 0 ? x.numel() / x.size(-1) : 0;
  // Only dW changes, so a frozen weight needs no check.
  if (torch::GradMode::is_enabled() && w.requires_grad() && rows < p.rht_size)
    throw UsageError("rht:" + std::to_string(p.rht_size) + ": the layer's input has " +
                     std::to_string(rows) +
                     " rows (batch x tokens, or an expert's capacity), fewer than one block of "
                     "the transform: nothing would be transformed (give the layer at least " +
                     std::to_string(p.rht_size) + " rows, or use a smaller rht:N)");
  // No bias travels as an empty tensor: autograd functions take no undefined inputs.
  return RhtLinear::apply(x, w, b.defined() ? b : torch::empty({0}), &p, int64_t(layer));
}

}  // namespace tb::emu
