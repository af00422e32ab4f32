// Scaling recipes: how a tensor is multiplied into a format's range before it is rounded, and
// divided back after, as Transformer Engine's FP8 recipes do it. Plain C++ over float arrays;
// emulation/torch_quant.h applies them to tensors and keeps the per-site state.
//
// All arithmetic is float32 in the order the sources give, so scales are bit-identical to
// theirs (tests/numerics/scaling_test.cc checks each against a reference written from them):
//  - current: scale = max / amax / 2^M (Float8CurrentScaling); 1 where amax is 0 or not
//    finite, FLT_MAX where the quotient overflows.
//  - delayed: DelayedScaling's amax_and_scale_update (Transformer Engine 2.x,
//    common/recipe/delayed_scaling.cu, the bulk kernel after the amax reduction, which its
//    PyTorch side uses; unlike the single-tensor kernel it does not roll a history whose new
//    amax is 0): see AmaxHistory.
//  - block: one scale per R x C tile, scale = max / amax (compute_scale_from_amax: 1 where amax
//    is 0 or Inf, FLT_MAX where the quotient overflows), optionally rounded down to a power of
//    two (Float8BlockScaling's power-of-two scales).
// Everywhere the value kept is q * (1 / scale): the stored inverse, as dequantizing kernels apply
// it. A tensor's amax ignores NaN elements (fmaxf reductions do).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "numerics/format.h"
#include "numerics/quantize.h"

namespace tb::num {

struct Scaling {
  enum class Kind { kNone, kCurrent, kDelayed, kBlock };
  Kind kind = Kind::kNone;
  int margin = 0;            // current, delayed: 2^margin of headroom below the format's max
  int history = 1024;        // delayed: amax history length (Transformer Engine's default)
  bool most_recent = false;  // delayed: the newest amax instead of the history's largest
  int block_rows = 1, block_cols = 128;  // block: the tile (rows x columns of the last dim)
  bool pow2 = false;                     // block: scales rounded down to powers of two

  bool enabled() const { return kind != Kind::kNone; }
  // The text after '@': parse_scaling(str(), ...) == *this.
  std::string str() const;
  bool operator==(const Scaling& o) const;
};

// A point's scaling suffix (after '@'):
//   current[:M]                          per-tensor current scaling, margin M (0-99)
//   delayed[:H[:max|recent[:M]]]         delayed scaling: history of H steps (1-100000,
//                                        default 1024), its largest or newest amax, margin M
//   block:RxC[:pow2]                     a scale per R x C tile (R, C 1-4096)
// Element formats only: `f` (written `format_text`) of block kind is refused (it carries its
// own scales). Throws tb::UsageError naming the scaling.
Scaling parse_scaling(const std::string& text, const Format& f, const std::string& format_text);

// The format as a point with a recipe rounds: scaled values beyond the largest finite one clip
// to it, as Transformer Engine's casts (satfinite) do; the overflow count says how many did.
Format saturating(Format f);

// The largest finite value the scaled tensor is fitted to: the float format's max, or the fixed
// format's.
float scaling_max(const Format& f);
// The smallest magnitude that rounds (to nearest even) beyond the largest finite value: the
// largest plus half its unit in the last place, or just above that where the tie rounds down
// (e4m3's 464 gives 448). What count_range calls an overflow.
float overflow_threshold(const Format& f);

float current_scale(float max, float amax, int margin);
float block_scale(float max, float amax, bool pow2);

// Delayed scaling for one tensor site. The scale a step uses comes from the amaxes of earlier
// steps; this step's amax joins the history when the step ends:
//   end_step(): if this step's amax a is 0 nothing changes (the site was not used); else the
//   history keeps the last H amaxes (a included), A = their largest (max) or a (most recent),
//   and scale = (max * 2^-M) / A where A is finite and > 0 (else the scale stays), FLT_MAX
//   where that overflows. The first step's scale is 1.
class AmaxHistory {
 public:
  explicit AmaxHistory(int length = 1024) : h_(size_t(length), 0.0f) {}
  void record(float amax);  // this step's amax: the largest over its calls (NaN ignored)
  void end_step(float max, int margin, bool most_recent);
  float scale() const { return scale_; }
  // The amaxes held, oldest first: after end_step() the last H - 1 steps' (the next step's
  // own completes the window of H); steps that recorded nothing are not in it.
  std::vector<float> window() const;

 private:
  // Transformer Engine's layout: [0] this step's slot, [1] the oldest, [length-1] the newest.
  std::vector<float> h_;
  float scale_ = 1;
};

// What rounding did to the values of one call: of the scaled values, how many were beyond the
// format's range (at or past overflow_threshold: clipped or overflowed), how many nonzero values
// became zero, and how many were NaN or Inf.
struct RangeCounts {
  uint64_t values = 0, overflow = 0, underflow = 0, nonfinite = 0;
  RangeCounts& operator+=(const RangeCounts& o);
};
// scaled: the values rounded (after scaling); q: what they became.
RangeCounts count_range(const float* scaled, const float* q, size_t n, float threshold);

// Block-scaled rounding of a row-major array of rows of `row` elements (n a multiple of row):
// each R x C tile (s.block_rows x s.block_cols) scaled by block_scale of its amax, rounded to
// `f` with o's rounding, and multiplied by the inverse scale. Tiles at the array's bottom may
// have fewer rows; `row` must be a multiple of C, or shorter than C (then a tile is one row
// wide); else throws tb::UsageError naming both.
// `counts` (may be null) gets count_range of the scaled values.
void quantize_block_scaled(const Format& f, const Scaling& s, const float* in, float* out, size_t n,
                           size_t row, const QuantOptions& o, RangeCounts* counts);

// One row of values rounded as a point with a current or block recipe rounds a tensor of
// them, value by value, to show what the recipe does (trainbench quantize). `f` is the format
// as such a point rounds it (saturating; see emulation/torch_quant.h). The tiles: the whole
// row for current scaling, runs of C values for block scaling (1 x C; a row shorter than C
// is one tile); each with its amax and scale. Per value: x * scale, that rounded, and `out`,
// the value kept, as the point's own path computes it (quantize() with the scale, or
// quantize_block_scaled): rounded * (1 / scale). Delayed scaling takes its scale from earlier
// steps, which one row has not had, and block tiles of more than one row need rows: both
// throw tb::UsageError, as does a block that does not divide the row.
struct ScaledRow {
  struct Tile {
    size_t first = 0, count = 0;
    float amax = 0, scale = 1;
  };
  std::vector<Tile> tiles;
  std::vector<float> scaled, rounded, out;
};
ScaledRow scale_row(const Format& f, const Scaling& s, const std::vector<float>& x,
                    const QuantOptions& o);

}  // namespace tb::num
