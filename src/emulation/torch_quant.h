// The number-format library applied to LibTorch tensors: quantizing a tensor (threaded with
// at::parallel_for), and a quantization op for autograd whose forward rounds the value to one
// format and whose backward rounds the incoming gradient to another.
#pragma once
#include <torch/torch.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "numerics/extension.h"
#include "numerics/format.h"
#include "numerics/quantize.h"

namespace tb::emu {

// One place where values are rounded: a format, a rounding mode, and for stochastic rounding
// a seed and a counter so successive calls draw fresh, reproducible random bits.
class QuantPoint {
 public:
  QuantPoint() = default;  // disabled: passes values through
  QuantPoint(num::Format format, num::Rounding rounding, uint64_t seed = 0);
  // `format[/rounding][@scaling]`, e.g. `e4m3`, `bf16/stochastic`, `e4m3@current`, `off`, or
  // `ext:PATH` (a format extension's convert and as_float). Throws UsageError.
  // Scaling `current[:M]`: per-tensor current scaling as Transformer Engine's
  // Float8CurrentScaling does it. Each tensor is multiplied by scale = max / amax / 2^M (in
  // float32: max the format's largest finite value, amax the tensor's largest magnitude, M
  // the margin), rounded, and multiplied by 1 / scale, so its largest value lands at the
  // format's largest instead of clipping or flushing. An amax of 0, Inf or NaN keeps scale 1.
  // Element formats only: block formats carry their own scales.
  static QuantPoint parse(const std::string& text, uint64_t seed = 0);
  bool current_scaling() const { return scaled_; }
  int margin() const { return margin_; }
  // The scale apply() uses for x (1 without scaling).
  float scale_for(const torch::Tensor& x) const;

  bool enabled() const { return format_.has_value() || ext_ != nullptr; }
  bool is_extension() const { return ext_ != nullptr; }
  const num::Format& format() const { return *format_; }
  num::Rounding rounding() const { return rounding_; }
  std::string str() const;
  // A fresh stochastic stream for one run, mixed with the point's own seed (parse's
  // `seed`, i.e. `--quant-seed`): a run seeded the same way draws the same bits.
  void reseed(uint64_t run_stream) {
    seed_ = base_seed_ * 0x9E3779B97F4A7C15ull + run_stream;
    calls_ = 0;
  }
  // Where the stochastic stream stands (calls so far), and moving it there: a recomputed
  // forward pass replays the rounding of its first run (model/activation_point.h).
  uint64_t position() const { return calls_.load(); }
  void seek(uint64_t calls) const { calls_ = calls; }

  // A float32 copy of x holding values of the format (x itself when disabled). Block formats
  // take blocks along the last dimension.
  torch::Tensor apply(const torch::Tensor& x) const;
  void apply_(torch::Tensor& x) const;  // in place
  // A step's weight gradient: rounded in place (where enabled), divided by the loss scale,
  // and whether every value is then finite. The values of apply_(g), g.div_(scale) and a
  // finiteness check, in one pass over g in cache-sized chunks instead of three.
  bool round_unscale_(torch::Tensor& g, double scale) const;

 private:
  // The options of one call (stochastic rounding: the next stream of this point).
  num::QuantOptions options() const;

  std::optional<num::Format> format_;
  std::shared_ptr<const num::Extension> ext_;
  num::Rounding rounding_ = num::Rounding::kNearestEven;
  bool scaled_ = false;  // @current
  int margin_ = 0;
  uint64_t base_seed_ = 0;  // as parsed
  uint64_t seed_ = 0;       // the current stream
  mutable std::atomic<uint64_t> calls_{0};

 public:
  QuantPoint(const QuantPoint& o)
      : format_(o.format_),
        ext_(o.ext_),
        rounding_(o.rounding_),
        scaled_(o.scaled_),
        margin_(o.margin_),
        base_seed_(o.base_seed_),
        seed_(o.seed_),
        calls_(o.calls_.load()) {}
  QuantPoint& operator=(const QuantPoint& o) {
    format_ = o.format_;
    ext_ = o.ext_;
    rounding_ = o.rounding_;
    scaled_ = o.scaled_;
    margin_ = o.margin_;
    base_seed_ = o.base_seed_;
    seed_ = o.seed_;
    calls_ = o.calls_.load();
    return *this;
  }
};

// Whether values already rounded by `first` come through `second` unchanged: the same float or
// fixed-point grid (any rounding mode leaves a value of its grid alone). Not block formats
// (re-rounding a block can move its shared exponent) or extensions (opaque). Lets the weights'
// forward rounding be skipped when the master weights are kept in the weights' format.
bool leaves_unchanged(const QuantPoint& second, const QuantPoint& first);

// Quantizes a float32 tensor (any shape; made contiguous) into a new tensor.
torch::Tensor quantize_tensor(const torch::Tensor& x, const num::Format& f,
                              const num::QuantOptions& o);

// y = forward.apply(x); in backward, dL/dx = backward.apply(dL/dy) (straight-through for the
// rounding itself). Either point may be disabled.
torch::Tensor quantize_op(const torch::Tensor& x, const QuantPoint& forward,
                          const QuantPoint& backward);

}  // namespace tb::emu
