// The number-format library applied to LibTorch tensors: quantizing a tensor (threaded with
// at::parallel_for), and a quantization op for autograd whose forward rounds the value to one
// format and whose backward rounds the incoming gradient to another.
#pragma once
#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "numerics/extension.h"
#include "numerics/format.h"
#include "numerics/quantize.h"
#include "numerics/scaling.h"

namespace tb::emu {

// A point's rounding of one tensor, a chunk at a time, inside another pass over the tensor (the
// fused optimizer update, emulation/fused_update.h): the values apply_ gives the whole tensor.
struct ChunkRounding {
  std::optional<num::Format> format;  // none: the point rounds nothing
  num::QuantOptions options;          // the tensor's call's (its stochastic stream), row set
  // Chunks start on multiples of it: whole rows for block formats (blocks run along the last
  // dimension), whole bands of tile rows for NVFP4, whole tiles for one-row NVFP4 tiles on rows
  // of whole tiles (its kernels then take the chunk as tiles end to end).
  int64_t unit = 1;
  // NVFP4: the tensor's amax (num::tensor_amax) goes into options.tensor_amax before any chunk
  // is rounded; its tile scales hang on it.
  bool needs_amax = false;
  // Rounds elements [lo, lo + len) of the tensor whose data starts at x, in place.
  void round(float* x, int64_t lo, int64_t len) const;
};

// One place where values are rounded: a format, a rounding mode, and for stochastic rounding
// a seed and a counter so successive calls draw fresh, reproducible random bits.
class QuantPoint {
 public:
  QuantPoint() = default;  // disabled: passes values through
  QuantPoint(num::Format format, num::Rounding rounding, uint64_t seed = 0);
  // `format[/rounding][@scaling]`, e.g. `e4m3`, `bf16/stochastic`, `e4m3@current`,
  // `e4m3@delayed:16`, `e4m3@block:1x128`, `off`, or `ext:PATH` (a format extension's convert
  // and as_float). Throws UsageError. The scaling recipes (numerics/scaling.h) multiply each
  // tensor by a scale before rounding and by its float32 inverse after, so its largest values
  // land near the format's largest instead of clipping or flushing:
  //  - current[:M]: the scale from this tensor's amax (Float8CurrentScaling);
  //  - delayed[:H[:max|recent[:M]]]: from an amax history of earlier steps, per site: the
  //    point's calls in a step are its sites, in call order (a step begins at begin_step());
  //  - block:RxC[:pow2]: a scale per R x C tile of the rows of the last dimension, every
  //    leading dimension flattened into the rows.
  // Element formats only: block formats carry their own scales.
  static QuantPoint parse(const std::string& text, uint64_t seed = 0);
  const num::Scaling& scaling() const { return scaling_; }
  bool current_scaling() const { return scaling_.kind == num::Scaling::Kind::kCurrent; }
  int margin() const { return scaling_.margin; }
  // The scale current scaling uses for x (1 for other points).
  float scale_for(const torch::Tensor& x) const;

  // A training step begins: delayed scaling folds the last step's amaxes into each site's
  // history and scale (AmaxHistory::end_step), and the next call is site 0 again.
  void begin_step() const;
  // Off while evaluating: calls use the scales but record no amax. Turning it off makes the
  // next call site 0 again (an evaluation's forward pass calls the point in the order the
  // training step's forward pass did).
  void set_recording(bool on) const;
  // Whether calls count what rounding did (take_stats), while recording: off by default. A
  // count costs two more passes over each tensor, so training to accuracy counts a sample of its
  // steps (EmulationOptions::count_every), and plain training runs none.
  void set_counting(bool on) const;
  bool counting() const;
  // What this point's rounding did while counting, since the last call (and forgets it):
  // values rounded,
  // overflows, underflows and NaN/Inf (num::RangeCounts), the largest amax seen, the range of
  // scales used (1 without scaling), and how many sites delayed scaling keeps.
  struct Stats {
    num::RangeCounts counts;
    float amax = 0, scale_min = 0, scale_max = 0;
    int sites = 0;
    bool overflow_counted = true;  // false for block formats (ScalingSample's)
    bool empty() const { return counts.values == 0; }
  };
  Stats take_stats() const;

  bool enabled() const { return format_.has_value() || ext_ != nullptr; }
  bool is_extension() const { return ext_ != nullptr; }
  const num::Format& format() const { return *format_; }
  num::Rounding rounding() const { return rounding_; }
  std::string str() const;
  // What this point was read from (the numerics item `a:e4m3@block:1x128`, or an option and
  // its value), named by errors that only its tensors can reveal (a block that does not divide
  // their rows); empty: none.
  void set_item(std::string item) { item_ = std::move(item); }
  // A fresh stochastic stream for one run, mixed with the point's own seed (parse's
  // `seed`, i.e. `--quant-seed`): a run seeded the same way draws the same bits.
  // A new run also starts its scaling state afresh (no sites, no counts).
  void reseed(uint64_t run_stream) {
    seed_ = base_seed_ * 0x9E3779B97F4A7C15ull + run_stream;
    calls_ = 0;
    state_ = std::make_unique<State>();
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
  // finiteness check, in one pass over g in cache-sized chunks instead of three. Without
  // `check` (no dynamic loss scaling to act on an overflow) the check is left out: true.
  bool round_unscale_(torch::Tensor& g, double scale, bool check = true) const;

  // Whether this point can round x a chunk at a time (ChunkRounding): a format without a
  // scaling recipe (no extension) on a contiguous float32 CPU tensor, or a disabled point; not
  // while it counts (chunks count nothing: the caller rounds the whole tensor with apply_).
  bool rounds_in_chunks(const torch::Tensor& x) const;
  // The rounding of x in chunks; taking it counts as x's call, as apply_(x) does.
  ChunkRounding chunk_rounding(const torch::Tensor& x) const;

 private:
  // The options of call number `call` of this point (stochastic rounding: its own stream).
  num::QuantOptions options(uint64_t call) const;
  // Counts a call's rounding into stats_ (scaled: the values rounded; q: what they became).
  void note(const torch::Tensor& scaled, const torch::Tensor& q, float amax, float scale) const;
  // A block format's blocks must divide x's rows (its last dimension) unless the format says
  // partial=on; a row no longer than a block is one block. Throws UsageError naming the point.
  void check_blocks(const torch::Tensor& x) const;

  // Mutable through const calls (points are shared const by the graphs that use them); every
  // copy of a point gets its own.
  struct State {
    std::mutex mu;
    uint64_t step_start = 0;  // calls_ when the step began
    uint64_t eval_start = 0;  // ... and when recording was last turned off
    bool recording = true;
    bool counting = false;
    std::vector<num::AmaxHistory> sites;  // delayed scaling
    Stats stats;
  };
  static std::unique_ptr<State> copy_state(const State& s);

  std::optional<num::Format> format_;
  std::shared_ptr<const num::Extension> ext_;
  num::Rounding rounding_ = num::Rounding::kNearestEven;
  num::Scaling scaling_;
  std::string item_;
  uint64_t base_seed_ = 0;                  // as parsed
  uint64_t seed_ = 0;                       // the current stream
  mutable std::atomic<uint64_t> calls_{0};  // every enabled call, stochastic or not
  std::unique_ptr<State> state_ = std::make_unique<State>();

 public:
  QuantPoint(const QuantPoint& o)
      : format_(o.format_),
        ext_(o.ext_),
        rounding_(o.rounding_),
        scaling_(o.scaling_),
        item_(o.item_),
        base_seed_(o.base_seed_),
        seed_(o.seed_),
        calls_(o.calls_.load()),
        state_(copy_state(*o.state_)) {}
  QuantPoint& operator=(const QuantPoint& o) {
    format_ = o.format_;
    ext_ = o.ext_;
    rounding_ = o.rounding_;
    scaling_ = o.scaling_;
    item_ = o.item_;
    base_seed_ = o.base_seed_;
    seed_ = o.seed_;
    calls_ = o.calls_.load();
    state_ = copy_state(*o.state_);
    return *this;
  }
};

// Whether values already rounded by `first` come through `second` unchanged: the same float or
// fixed-point grid (any rounding mode leaves a value of its grid alone), or the same MX format
// with float elements and the floor scale (a rounded block keeps its shared exponent). Not
// other block formats (re-rounding can move a shared exponent or NVFP4's tensor scale) or
// extensions (opaque). Lets the weights' forward rounding be skipped when the master weights
// are kept in the weights' format.
bool leaves_unchanged(const QuantPoint& second, const QuantPoint& first);

// Quantizes a float32 tensor (any shape; made contiguous) into a new tensor.
torch::Tensor quantize_tensor(const torch::Tensor& x, const num::Format& f,
                              const num::QuantOptions& o);

// y = forward.apply(x); in backward, dL/dx = backward.apply(dL/dy) (straight-through for the
// rounding itself). Either point may be disabled.
torch::Tensor quantize_op(const torch::Tensor& x, const QuantPoint& forward,
                          const QuantPoint& backward);

}  // namespace tb::emu
