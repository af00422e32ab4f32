#include "emulation/torch_quant.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cmath>

#include "base/errors.h"
#include "numerics/policy.h"

namespace tb::emu {

QuantPoint::QuantPoint(num::Format format, num::Rounding rounding, uint64_t seed)
    : format_(std::move(format)), rounding_(rounding), base_seed_(seed), seed_(seed) {}

QuantPoint QuantPoint::parse(const std::string& text, uint64_t seed) {
  if (text.empty() || text == "off" || text == "none") return {};
  if (const auto at = text.find('@'); at != std::string::npos && text.rfind("ext:", 0) != 0) {
    QuantPoint q = parse(text.substr(0, at), seed);
    if (!q.format_)
      throw UsageError("scaling '" + text.substr(at + 1) + "' on '" + text.substr(0, at) +
                       "': a point that rounds nothing has nothing to scale");
    q.margin_ = num::parse_scaling(text.substr(at + 1), *q.format_, text.substr(0, at));
    q.scaled_ = true;
    return q;
  }
  if (text.rfind("ext:", 0) == 0) {
    QuantPoint q;
    q.ext_ = num::Extension::load(text.substr(4));
    return q;
  }
  const auto slash = text.rfind('/');
  if (slash == std::string::npos)
    return QuantPoint(num::parse_format(text), num::Rounding::kNearestEven, seed);
  return QuantPoint(num::parse_format(text.substr(0, slash)),
                    num::parse_rounding(text.substr(slash + 1)), seed);
}

std::string QuantPoint::str() const {
  if (!enabled()) return "off";
  if (ext_) return "ext:" + ext_->path();
  const std::string f = format_->display_name();
  const std::string r =
      rounding_ == num::Rounding::kNearestEven ? f : f + "/" + num::rounding_name(rounding_);
  if (!scaled_) return r;
  return r + "@current" + (margin_ ? ":" + std::to_string(margin_) : "");
}

float QuantPoint::scale_for(const torch::Tensor& x) const {
  if (!scaled_ || x.numel() == 0) return 1;
  const float amax = x.detach().abs().max().to(torch::kFloat).item<float>();
  if (!(amax > 0) || !std::isfinite(amax)) return 1;
  const float max = float(format_->kind == num::Format::Kind::kFixed ? format_->fx.max_value()
                                                                     : format_->fp.max_finite());
  // Transformer Engine's order: (max / amax) / 2^margin, in float32.
  const float scale = max / amax / std::ldexp(1.0f, margin_);
  return std::isfinite(scale) ? scale : 1.0f;
}

namespace {

// Tensors are split over threads only from this many elements (see quantize_into).
constexpr int64_t kParallelFrom = int64_t(1) << 20;

// Quantizes `in` (contiguous float32) into `out` (contiguous float32, same size; may be `in`).
void quantize_into(const torch::Tensor& in, torch::Tensor& out, const num::Format& f,
                   const num::QuantOptions& o) {
  const int64_t n = in.numel();
  if (n == 0) return;
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t row = in.dim() > 0 ? std::max<int64_t>(in.size(-1), 1) : 1;
  // Chunks must not split a block: whole rows for block formats, else any 64 elements.
  const bool block = f.kind == num::Format::Kind::kBlock;
  const int64_t unit = block ? row : 64;
  const int64_t units = (n + unit - 1) / unit;
  // Only tensors of a million elements or more are split over threads. A training step's
  // tensors are smaller (the MLP's largest, 200K elements, rounds in ~0.15 ms on one core), and
  // each at::parallel_for region leaves its OpenMP worker spinning on the other core for a
  // while, in the way of the OpenBLAS threads of the next matrix multiply: with the old
  // 32K-element grain the fp8 step's ~9 extra regions cost more than splitting saved.
  const int64_t grain = std::max<int64_t>(1, kParallelFrom / unit);
  at::parallel_for(0, units, grain, [&](int64_t b, int64_t e) {
    num::QuantOptions part = o;
    part.threads = 1;
    part.row = block ? size_t(row) : 0;
    const int64_t lo = b * unit, hi = std::min(n, e * unit);
    part.offset = o.offset + uint64_t(lo);
    num::quantize(f, src + lo, dst + lo, size_t(hi - lo), part);
  });
}

}  // namespace

torch::Tensor quantize_tensor(const torch::Tensor& x, const num::Format& f,
                              const num::QuantOptions& o) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "quantize_tensor: float32 tensors only, got ",
              x.scalar_type());
  TORCH_CHECK(x.device().is_cpu(), "quantize_tensor: CPU tensors only");
  const torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  quantize_into(in, out, f, o);
  return out;
}

num::QuantOptions QuantPoint::options() const {
  num::QuantOptions o;
  o.rounding = rounding_;
  // Each call of a stochastic point draws a fresh stream: (seed, call number).
  if (rounding_ == num::Rounding::kStochastic) {
    o.seed = seed_ * 0x9E3779B97F4A7C15ull + calls_.fetch_add(1);
  }
  return o;
}

torch::Tensor QuantPoint::apply(const torch::Tensor& x) const {
  if (!enabled()) return x;
  // An operator of its own in profiles, so the emulation's cost shows as one row.
  RECORD_FUNCTION("tb::quantize", std::vector<c10::IValue>({x}));
  if (ext_) {
    const torch::Tensor in = x.to(torch::kFloat).contiguous();
    torch::Tensor out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, in.numel(), 4096,
                     [&](int64_t b, int64_t e) { ext_->round(src + b, dst + b, size_t(e - b)); });
    return out.to(x.scalar_type());
  }
  const num::QuantOptions o = options();
  if (scaled_) {
    const torch::Tensor xf = x.to(torch::kFloat);
    const float scale = scale_for(xf);
    if (scale != 1.0f) {
      torch::Tensor y = quantize_tensor(xf * scale, *format_, o);
      y.mul_(1.0f / scale);  // the stored inverse, as the dequantizing kernels apply it
      return y.to(x.scalar_type());
    }
  }
  if (x.scalar_type() != torch::kFloat)
    return quantize_tensor(x.to(torch::kFloat), *format_, o).to(x.scalar_type());
  return quantize_tensor(x, *format_, o);
}

void QuantPoint::apply_(torch::Tensor& x) const {
  if (!enabled()) return;
  RECORD_FUNCTION("tb::quantize_", std::vector<c10::IValue>({x}));
  torch::NoGradGuard no_grad;
  // The common case (optimizer state, master weights) rounds in place: no new tensor, no copy.
  if (format_ && !scaled_ && x.scalar_type() == torch::kFloat && x.device().is_cpu() &&
      x.is_contiguous()) {
    torch::Tensor d = x.detach();
    quantize_into(d, d, *format_, options());
    d.unsafeGetTensorImpl()->bump_version();  // as copy_ would: it is an in-place change of x
    return;
  }
  x.copy_(apply(x.detach()));
}

bool QuantPoint::round_unscale_(torch::Tensor& g, double scale) const {
  torch::NoGradGuard no_grad;
  if (ext_ || scaled_ || g.scalar_type() != torch::kFloat || !g.device().is_cpu() ||
      !g.is_contiguous()) {
    apply_(g);
    if (scale != 1) g.div_(scale);
    return torch::isfinite(g).all().item<bool>();
  }
  RECORD_FUNCTION(enabled() ? "tb::quantize_" : "tb::unscale_", std::vector<c10::IValue>({g}));
  const int64_t n = g.numel();
  if (n == 0) return true;
  float* x = g.data_ptr<float>();
  const bool block = format_ && format_->kind == num::Format::Kind::kBlock;
  const int64_t row = g.dim() > 0 ? std::max<int64_t>(g.size(-1), 1) : 1;
  // Chunks stay in L1 between the three steps; block formats round whole rows.
  const int64_t chunk = block ? row * std::max<int64_t>(1, 4096 / row) : 4096;
  const int64_t chunks = (n + chunk - 1) / chunk;
  num::QuantOptions o;
  if (format_) o = options();
  o.threads = 1;
  o.row = block ? size_t(row) : 0;
  // The scalar division LibTorch's div_ does on float32 (the scale converted to float).
  const float s = float(scale);
  std::atomic<uint32_t> special{0};
  at::parallel_for(0, chunks, std::max<int64_t>(1, kParallelFrom / chunk),
                   [&](int64_t b, int64_t e) {
                     uint32_t sp = 0;
                     for (int64_t c = b; c < e; ++c) {
                       const int64_t lo = c * chunk, len = std::min(chunk, n - lo);
                       float* v = x + lo;
                       if (format_) {
                         num::QuantOptions part = o;
                         part.offset = o.offset + uint64_t(lo);
                         num::quantize(*format_, v, v, size_t(len), part);
                       }
                       if (s != 1.0f)
                         for (int64_t i = 0; i < len; ++i) v[i] = v[i] / s;
                       const auto* bits = reinterpret_cast<const uint32_t*>(v);
                       for (int64_t i = 0; i < len; ++i)
                         sp |= uint32_t((bits[i] & 0x7F800000u) == 0x7F800000u);
                     }
                     special.fetch_or(sp);
                   });
  g.unsafeGetTensorImpl()->bump_version();
  return special.load() == 0;
}

namespace {

struct QuantizeFunction : public torch::autograd::Function<QuantizeFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               const QuantPoint* fwd, const QuantPoint* bwd) {
    ctx->saved_data["fwd"] = reinterpret_cast<int64_t>(fwd);
    ctx->saved_data["bwd"] = reinterpret_cast<int64_t>(bwd);
    return fwd->enabled() ? fwd->apply(x) : x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* fwd = reinterpret_cast<const QuantPoint*>(ctx->saved_data["fwd"].toInt());
    const auto* bwd = reinterpret_cast<const QuantPoint*>(ctx->saved_data["bwd"].toInt());
    // Differentiated again (create_graph: a gradient penalty): the backward rounding is itself
    // a rounding op, whose own gradient is rounded at the forward point.
    if (torch::GradMode::is_enabled())
      return {quantize_op(grads[0], *bwd, *fwd), torch::Tensor(), torch::Tensor()};
    return {bwd->enabled() ? bwd->apply(grads[0]) : grads[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool leaves_unchanged(const QuantPoint& second, const QuantPoint& first) {
  if (!second.enabled()) return true;
  if (!first.enabled() || second.is_extension() || first.is_extension()) return false;
  return second.format().kind != num::Format::Kind::kBlock && second.format() == first.format();
}

torch::Tensor quantize_op(const torch::Tensor& x, const QuantPoint& forward,
                          const QuantPoint& backward) {
  if (!forward.enabled() && !backward.enabled()) return x;
  // The points must outlive the graph: they belong to the model or the policy that built it.
  return QuantizeFunction::apply(x, &forward, &backward);
}

}  // namespace tb::emu
