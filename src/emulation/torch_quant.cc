#include "emulation/torch_quant.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cmath>
#include <limits>

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
    q.scaling_ = num::parse_scaling(text.substr(at + 1), *q.format_, text.substr(0, at));
    q.format_ = num::saturating(*q.format_);
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
  return scaling_.enabled() ? r + "@" + scaling_.str() : r;
}

namespace {

float amax_of(const torch::Tensor& contiguous_float) {
  const int64_t n = contiguous_float.numel();
  // Split over LibTorch's threads only where quantize_into splits too (a million elements).
  const int threads = n >= (int64_t(1) << 20) ? at::get_num_threads() : 1;
  return num::tensor_amax(contiguous_float.data_ptr<float>(), size_t(n), threads);
}

}  // namespace

float QuantPoint::scale_for(const torch::Tensor& x) const {
  if (!current_scaling() || x.numel() == 0) return 1;
  const torch::Tensor xf = x.detach().to(torch::kFloat).contiguous();
  return num::current_scale(num::scaling_max(*format_), amax_of(xf), scaling_.margin);
}

std::unique_ptr<QuantPoint::State> QuantPoint::copy_state(const State& s) {
  auto out = std::make_unique<State>();
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(s.mu));
  out->step_start = s.step_start;
  out->eval_start = s.eval_start;
  out->recording = s.recording;
  out->counting = s.counting;
  out->sites = s.sites;
  out->stats = s.stats;
  return out;
}

void QuantPoint::begin_step() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (scaling_.kind == num::Scaling::Kind::kDelayed)
    for (num::AmaxHistory& h : state_->sites)
      h.end_step(num::scaling_max(*format_), scaling_.margin, scaling_.most_recent);
  state_->step_start = calls_.load();
}

bool QuantPoint::counting() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->recording && state_->counting;
}

void QuantPoint::set_counting(bool on) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->counting = on;
}

void QuantPoint::set_recording(bool on) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->recording = on;
  if (!on) state_->eval_start = calls_.load();
}

QuantPoint::Stats QuantPoint::take_stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  Stats out = state_->stats;
  out.sites = int(state_->sites.size());
  state_->stats = Stats{};
  return out;
}

void QuantPoint::note(const torch::Tensor& scaled, const torch::Tensor& q, float amax,
                      float scale) const {
  // A block format's range moves with each block's own scale: its values past that range are
  // not told apart from their rounding, so it counts no overflow (an infinite threshold).
  const float threshold = format_->kind == num::Format::Kind::kBlock
                              ? std::numeric_limits<float>::infinity()
                              : num::overflow_threshold(*format_);
  const num::RangeCounts c = num::count_range(scaled.data_ptr<float>(), q.data_ptr<float>(),
                                              size_t(scaled.numel()), threshold);
  std::lock_guard<std::mutex> lock(state_->mu);
  Stats& s = state_->stats;
  s.overflow_counted = format_->kind != num::Format::Kind::kBlock;
  if (s.empty()) {
    s.scale_min = s.scale_max = scale;
  } else {
    s.scale_min = std::min(s.scale_min, scale);
    s.scale_max = std::max(s.scale_max, scale);
  }
  s.counts += c;
  s.amax = std::fmax(s.amax, amax);
}

namespace {

// isfinite(g).all() as one integer pass over the bits (a float32 CPU tensor, contiguous): the
// LibTorch expression runs four operators over the tensor, and on a weight gradient took longer
// than rounding it.
bool all_finite(const torch::Tensor& g) {
  if (g.scalar_type() != torch::kFloat || !g.device().is_cpu() || !g.is_contiguous())
    return torch::isfinite(g).all().item<bool>();
  return num::all_finite(g.data_ptr<float>(), size_t(g.numel()));
}

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
  const bool nvfp4 = block && f.blk.kind == num::BlockFormat::Kind::kNvfp4;
  // NVFP4's tiles span several rows.
  const int64_t unit = block ? (nvfp4 ? row * f.blk.rows : row) : 64;
  const int64_t units = (n + unit - 1) / unit;
  // Only tensors of a million elements or more are split over threads. A training step's
  // tensors are smaller (the MLP's largest, 200K elements, rounds in ~0.15 ms on one core), and
  // each at::parallel_for region leaves its OpenMP worker spinning on the other core for a
  // while, in the way of the OpenBLAS threads of the next matrix multiply: with the old
  // 32K-element grain the fp8 step's ~9 extra regions cost more than splitting saved.
  const int64_t grain = std::max<int64_t>(1, kParallelFrom / unit);
  num::QuantOptions whole = o;
  // A tensor that may be split into chunks needs its amax up front; one rounded in a single
  // call leaves it to quantize(), which takes it from the tiles' amaxes in the same pass.
  if (nvfp4 && whole.tensor_amax < 0 && units > grain)
    whole.tensor_amax = num::tensor_amax(src, size_t(n), at::get_num_threads());
  std::mutex amax_mu;
  if (o.input_amax) *o.input_amax = 0;
  at::parallel_for(0, units, grain, [&](int64_t b, int64_t e) {
    num::QuantOptions part = whole;
    part.threads = 1;
    part.row = block ? size_t(row) : 0;
    const int64_t lo = b * unit, hi = std::min(n, e * unit);
    part.offset = o.offset + uint64_t(lo);
    float amax = 0;
    if (o.input_amax) part.input_amax = &amax;
    num::quantize(f, src + lo, dst + lo, size_t(hi - lo), part);
    if (o.input_amax) {
      std::lock_guard<std::mutex> lock(amax_mu);
      *o.input_amax = std::fmax(*o.input_amax, amax);
    }
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

num::QuantOptions QuantPoint::options(uint64_t call) const {
  num::QuantOptions o;
  o.rounding = rounding_;
  // Each call of a stochastic point draws a fresh stream: (seed, call number).
  if (rounding_ == num::Rounding::kStochastic) o.seed = seed_ * 0x9E3779B97F4A7C15ull + call;
  return o;
}

void QuantPoint::check_blocks(const torch::Tensor& x) const {
  if (!format_ || format_->kind != num::Format::Kind::kBlock || format_->blk.partial) return;
  const int64_t row = x.dim() > 0 ? std::max<int64_t>(x.size(-1), 1) : 1;
  const int64_t block = format_->blk.block;
  if (row <= block || row % block == 0) return;
  std::string shape;
  for (const int64_t d : x.sizes()) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
  const std::string what = format_->display_name() + ": blocks of " + std::to_string(block) +
                           " do not divide the rows of " + std::to_string(row) + " elements of a " +
                           shape + " tensor (" + format_->str() +
                           ",partial=on ends each row in a shorter block; or give this layer "
                           "another format)";
  throw UsageError(item_.empty() ? what : "'" + item_ + "': " + what);
}

torch::Tensor QuantPoint::apply(const torch::Tensor& x) const {
  if (!enabled()) return x;
  check_blocks(x);
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
  const uint64_t call = calls_.fetch_add(1);
  const num::QuantOptions o = options(call);
  const torch::Tensor xf = x.to(torch::kFloat).contiguous();
  float amax = 0, scale = 1;
  switch (scaling_.kind) {
    case num::Scaling::Kind::kNone:
      break;
    case num::Scaling::Kind::kCurrent:
      amax = amax_of(xf);
      scale = num::current_scale(num::scaling_max(*format_), amax, scaling_.margin);
      break;
    case num::Scaling::Kind::kDelayed: {
      // The scale comes from the history before this tensor's amax joins it, so the amax can
      // be taken in the rounding pass itself (below) where nothing else needs the input.
      const bool fused = format_->kind == num::Format::Kind::kFloat && !counting();
      if (!fused) amax = amax_of(xf);
      size_t site = ~size_t(0);
      bool rec = false;
      uint64_t start = 0;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        rec = state_->recording;
        start = rec ? state_->step_start : state_->eval_start;
        // A call before its step's start (a stream moved back) has no site.
        if (call >= start) site = size_t(call - start);
        if (rec && site != ~size_t(0))
          while (state_->sites.size() <= site) state_->sites.emplace_back(scaling_.history);
        if (site < state_->sites.size()) {
          num::AmaxHistory& h = state_->sites[site];
          scale = h.scale();
          if (rec && !fused) h.record(amax);
        }
      }
      if (fused) {
        num::QuantOptions so = o;
        so.scale = scale;
        so.input_amax = &amax;
        torch::Tensor y = quantize_tensor(xf, *format_, so);
        if (rec && site != ~size_t(0)) {
          // Into the step whose scale it used: a step begun meanwhile (begin_step rolls the
          // histories) or an evaluation started meanwhile does not take it.
          std::lock_guard<std::mutex> lock(state_->mu);
          if (state_->recording && state_->step_start == start && site < state_->sites.size())
            state_->sites[site].record(amax);
        }
        return y.to(x.scalar_type());
      }
      break;
    }
    case num::Scaling::Kind::kBlock: {
      torch::Tensor y = torch::empty_like(xf);
      num::RangeCounts c;
      num::QuantOptions bo = o;
      bo.threads = 1;
      // Counting keeps each block's scaled values; otherwise a block is one pass.
      const bool count = counting();
      try {
        num::quantize_block_scaled(
            *format_, scaling_, xf.data_ptr<float>(), y.data_ptr<float>(), size_t(xf.numel()),
            size_t(xf.dim() > 0 ? std::max<int64_t>(xf.size(-1), 1) : 1), bo, count ? &c : nullptr);
      } catch (const UsageError& e) {
        if (item_.empty()) throw;
        throw UsageError("'" + item_ + "': " + e.what());
      }
      if (!count) return y.to(x.scalar_type());
      std::lock_guard<std::mutex> lock(state_->mu);
      Stats& s = state_->stats;
      s.counts += c;
      s.amax = std::fmax(s.amax, amax_of(xf));
      s.scale_min = s.scale_max = 1;  // per tile; not summarized
      return y.to(x.scalar_type());
    }
  }
  const bool count = counting();
  if (!count && format_->kind == num::Format::Kind::kFloat) {
    // One pass: the scale applied inside the quantizer (the same float32 products).
    num::QuantOptions so = o;
    so.scale = scale;
    return quantize_tensor(xf, *format_, so).to(x.scalar_type());
  }
  const torch::Tensor in = scale == 1.0f ? xf : xf * scale;
  torch::Tensor y = quantize_tensor(in, *format_, o);
  // Training's rounding only: an evaluation's is not what the recipe did to the step.
  if (count) {
    if (!scaling_.enabled()) amax = amax_of(xf);
    note(in, y, amax, scale);
  }
  if (scale != 1.0f) y.mul_(1.0f / scale);  // the stored inverse, as dequantizing kernels apply it
  return y.to(x.scalar_type());
}

void QuantPoint::apply_(torch::Tensor& x) const {
  if (!enabled()) return;
  check_blocks(x);
  RECORD_FUNCTION("tb::quantize_", std::vector<c10::IValue>({x}));
  torch::NoGradGuard no_grad;
  // The common case (optimizer state, master weights) rounds in place: no new tensor, no copy;
  // a counted call goes through apply(), which counts.
  if (format_ && !scaling_.enabled() && x.scalar_type() == torch::kFloat && x.device().is_cpu() &&
      x.is_contiguous() && !counting()) {
    torch::Tensor d = x.detach();
    quantize_into(d, d, *format_, options(calls_.fetch_add(1)));
    d.unsafeGetTensorImpl()->bump_version();  // as copy_ would: it is an in-place change of x
    return;
  }
  x.copy_(apply(x.detach()));
}

bool QuantPoint::rounds_in_chunks(const torch::Tensor& x) const {
  if (!enabled()) return true;
  // A counted step rounds whole tensors (apply_ counts; the chunks do not).
  return format_ && !scaling_.enabled() && !counting() && x.layout() == torch::kStrided &&
         x.scalar_type() == torch::kFloat && x.device().is_cpu() && x.is_contiguous();
}

ChunkRounding QuantPoint::chunk_rounding(const torch::Tensor& x) const {
  ChunkRounding r;
  if (!enabled()) return r;
  TORCH_CHECK(rounds_in_chunks(x), "chunk_rounding: ", str(), " rounds this tensor whole");
  check_blocks(x);
  r.format = *format_;
  r.options = options(calls_.fetch_add(1));
  r.options.threads = 1;
  // As quantize_into splits a tensor: rows along the last dimension for block formats.
  const int64_t row = x.dim() > 0 ? std::max<int64_t>(x.size(-1), 1) : 1;
  if (format_->kind == num::Format::Kind::kBlock) {
    r.options.row = size_t(row);
    r.needs_amax = format_->blk.kind == num::BlockFormat::Kind::kNvfp4;
    r.unit = r.needs_amax ? row * format_->blk.rows : row;
    // One-row tiles on rows of whole tiles are tiles end to end (nvfp4_serial takes them so):
    // chunks of whole tiles then. Chunks of whole rows of 784 (a Fashion-MNIST layer's weights)
    // were 245 tiles, whose amax kernel takes 16 at a time and left 5 per chunk to a scalar
    // loop: a 256 x 784 tensor in 4096-element chunks rounded in 46.5 us against 47.6 us in
    // 3920-element ones (2-core Zen 4, medians of 9).
    const int64_t block = format_->blk.block;
    if (r.needs_amax && format_->blk.rows == 1 && row % block == 0) r.unit = block;
  }
  return r;
}

void ChunkRounding::round(float* x, int64_t lo, int64_t len) const {
  if (!format || len <= 0) return;
  num::QuantOptions part = options;
  part.offset = options.offset + uint64_t(lo);
  num::quantize(*format, x + lo, x + lo, size_t(len), part);
}

bool QuantPoint::round_unscale_(torch::Tensor& g, double scale, bool check) const {
  torch::NoGradGuard no_grad;
  // NVFP4 needs the whole tensor's amax before any chunk is rounded.
  const bool nvfp4 = format_ && format_->kind == num::Format::Kind::kBlock &&
                     format_->blk.kind == num::BlockFormat::Kind::kNvfp4;
  if (ext_ || scaling_.enabled() || nvfp4 || g.scalar_type() != torch::kFloat ||
      !g.device().is_cpu() || !g.is_contiguous() || (format_ && counting())) {
    // Scaled points, NVFP4 and fixed point saturate: an overflowed gradient must be seen before
    // it is clipped, or dynamic loss scaling would never back off.
    const bool finite_in = !check || all_finite(g);
    apply_(g);
    if (scale != 1) g.div_(scale);
    return finite_in && (!check || all_finite(g));
  }
  RECORD_FUNCTION(enabled() ? "tb::quantize_" : "tb::unscale_", std::vector<c10::IValue>({g}));
  check_blocks(g);
  const int64_t n = g.numel();
  if (n == 0) return true;
  float* x = g.data_ptr<float>();
  const bool block = format_ && format_->kind == num::Format::Kind::kBlock;
  const int64_t row = g.dim() > 0 ? std::max<int64_t>(g.size(-1), 1) : 1;
  // Chunks stay in L1 between the three steps; block formats round whole rows.
  const int64_t chunk = block ? row * std::max<int64_t>(1, 4096 / row) : 4096;
  const int64_t chunks = (n + chunk - 1) / chunk;
  num::QuantOptions o;
  if (format_) o = options(calls_.fetch_add(1));
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
                       // The input too, as above: fixed point clips Inf to its largest value.
                       if (check) sp |= uint32_t(!num::all_finite(v, size_t(len)));
                       if (format_) {
                         num::QuantOptions part = o;
                         part.offset = o.offset + uint64_t(lo);
                         num::quantize(*format_, v, v, size_t(len), part);
                       }
                       if (s != 1.0f)
                         for (int64_t i = 0; i < len; ++i) v[i] = v[i] / s;
                       if (check) sp |= uint32_t(!num::all_finite(v, size_t(len)));
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
    // A copy even when only the backward point rounds: LibTorch returns an input given back
    // as-is as a view of it, and an in-place operator on that view (a model's ReLU(inplace))
    // then throws "is a view and is being modified inplace". The copy costs the fc config's
    // step ~20 us (e:fp32 against fp32, forward phase), where `a:` makes a new tensor anyway.
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
  // A scaled point's grid moves with its scale.
  if (second.scaling().enabled() || first.scaling().enabled()) return false;
  if (second.format() != first.format()) return false;
  const num::Format& f = second.format();
  if (f.kind != num::Format::Kind::kBlock) return true;
  // MX with float elements and the floor scale: a rounded block's largest value lands in
  // [2^emax, the element's largest], so rounding it again finds the same shared exponent and
  // every element on its grid (tests: MxFloorBlocksRoundedTwiceAreUnchanged). Other block
  // formats can move their shared exponent or per-tensor scale.
  return f.blk.kind == num::BlockFormat::Kind::kMx && f.blk.element != "int8" &&
         f.blk.scale_mode == num::BlockFormat::ScaleMode::kFloor;
}

torch::Tensor quantize_op(const torch::Tensor& x, const QuantPoint& forward,
                          const QuantPoint& backward) {
  if (!forward.enabled() && !backward.enabled()) return x;
  // The points must outlive the graph: they belong to the model or the policy that built it.
  return QuantizeFunction::apply(x, &forward, &backward);
}

}  // namespace tb::emu
