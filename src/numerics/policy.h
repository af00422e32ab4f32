// A number-format policy as one line of text, so that it can sit in a config
// (`fc:...,numerics=w:e4m3+a:e4m3+e:e5m2+g:e5m2`) and every result that used it can be re-run
// by pasting its config. Grammar (docs/numerics.md, "Formats in any family"):
//   numerics = ITEM ('+' ITEM)*
//   ITEM     = KEY['.'N] ':' POINT  KEY: w weights, a activations, e errors (activation
//                                   gradients), g weight gradients, o optimizer state,
//                                   m master weights, ls loss scale
//            | POINT                the same POINT at all six places
//   KEY.N sets one layer's point (layers: the model's Linear and Conv2d modules, 0-based, in
//   module order); it wins over the KEY's global point whatever the item order.
//            | act:ACTIVATION     the model's activation replaced (its ReLUs; in recurrent
//                                   cells the function it approximates): tanh | sigmoid |
//                                   tanh-pwl | sigmoid-pwl | ext:PATH
//            | unit:UNIT          every Linear, Conv2d and recurrent gate product on a custom
//                                   processing unit: mad:mul=F;acc=F;width=W;order=O | ext:PATH
//            | rht:N[:SEED]       a random Hadamard transform of N rows (a power of two, 2-256;
//                                   seed default 1) on both inputs of every Linear layer's
//                                   weight-gradient GEMM before they are rounded, as in the
//                                   NVFP4 recipe (emulation/hadamard.h; family models)
//            | RECIPE             a mixed-precision recipe as frameworks run it, the same
//                                   names `simulate --format` takes: amp-fp16 (w, a, e, g in
//                                   fp16, fp32 optimizer state and masters, ls:dynamic),
//                                   amp-bf16 (the same in bf16, no loss scale), tf32 (w, a, e
//                                   rounded to TF32, as tensor cores read their inputs)
//   POINT    = FORMAT['/'ROUNDING]['@'SCALING] | ext:PATH | off
//                                   (ls: none | static:S | dynamic[:S0]); SCALING: a scaling
//                                   recipe, numerics/scaling.h (current, delayed, block)
// A config value cannot hold ',', so a format descriptor writes its commas as ';'
// (`fixed:w=8;f=4`). Only the text lives here; applying it to tensors is emulation/'s job.
#pragma once
#include <array>
#include <map>
#include <string>

#include "numerics/format.h"

namespace tb::num {

struct NumericsPolicy {
  // In the order of the KEY list above; "off" leaves values in float32.
  static constexpr std::array<const char*, 6> kKeys = {"w", "a", "e", "g", "o", "m"};
  std::array<std::string, 6> points = {"off", "off", "off", "off", "off", "off"};
  std::string loss_scale = "none";
  // Per-layer points: layer -> points, "" where the layer takes the global point.
  std::map<int, std::array<std::string, 6>> layers;
  std::string activation = "relu";  // act: what replaces the model's activation
  std::string unit;                 // unit: as written (';' for ','), "" for none
  std::string rht;                  // rht: "N" or "N:SEED", "" for none

  const std::string& weights() const { return points[0]; }
  const std::string& activations() const { return points[1]; }
  const std::string& errors() const { return points[2]; }
  const std::string& weight_grads() const { return points[3]; }
  const std::string& optimizer_state() const { return points[4]; }
  const std::string& master() const { return points[5]; }
  // Nothing rounded, no loss scale, no operator replaced: the plain training step.
  bool is_fp32() const;
  // The recipe whose places these are (amp-fp16, amp-bf16, tf32), or "".
  std::string recipe() const;
  // The format an accelerator running this policy would multiply in: its recipe, else the
  // widest of the weights', activations' and errors' global formats, as parse_format text
  // (commas restored) with its scaling suffix where it has one (`e4m3@current`, which
  // simulate charges), or "" where one of them is off or an extension (the tensors stay
  // float32 or their format is opaque). Per-layer points are not considered.
  std::string compute_format() const;
  // Canonical text: parse_numerics(str()) == *this. "fp32" when nothing is rounded.
  std::string str() const;
  bool operator==(const NumericsPolicy& o) const {
    return points == o.points && loss_scale == o.loss_scale && layers == o.layers &&
           activation == o.activation && unit == o.unit && rht == o.rht;
  }
};

// `none` (scale 1), `static:S`, or `dynamic[:S0]` (start at S0, default 65536; halve and
// skip the step on overflow, double after 2000 good steps). Throws tb::UsageError.
struct LossScale {
  bool dynamic = false;
  double scale = 1;
};
LossScale parse_loss_scale(const std::string& text);

// `N` or `N:SEED` (an rht: item's value): N a power of two 2-256. Throws tb::UsageError.
struct Rht {
  int size = 0;  // 0: none
  uint64_t seed = 1;
};
Rht parse_rht(const std::string& text);

// Throws tb::UsageError naming the bad item.
NumericsPolicy parse_numerics(const std::string& text);

// A point's text with ';' restored to ',' for parse_format (and the reverse for config text).
std::string point_from_config(const std::string& point);
std::string point_to_config(const std::string& point);

}  // namespace tb::num
