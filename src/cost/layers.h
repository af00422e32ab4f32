#pragma once
// Cost of the building blocks the generated families are made of. Every number of
// docs/cost-model.md is implemented here and nowhere else.
#include <string>

#include "cost/cost.h"

namespace tb::cost {

// Fully-connected layer on `rows` rows (batch, or batch x time steps).
// `input_grad`: false for a first layer whose input needs no gradient.
LayerCost linear(const std::string& name, double rows, int64_t in, int64_t out, int64_t eb,
                 bool input_grad);

// A convolution of any kernel shape, stride, padding and grouping (depthwise: groups ==
// cin == cout), with or without bias. Each output element takes cin/groups x kh x kw MACs;
// the layer is `groups` GEMMs of (batch x oh x ow) x (cout/groups) x (cin/groups x kh x kw).
// A bias adds one FLOP per output forward and one to the weight gradient. `weight_grad`:
// false for frozen weights (the detection backbones' bottom stages).
struct ConvGeometry {
  int64_t batch, cin, h, w, cout, kh, kw, sh, sw, ph, pw, groups;
  bool bias;
  int64_t out_h() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t out_w() const { return (w + 2 * pw - kw) / sw + 1; }
};
LayerCost conv(const std::string& name, const ConvGeometry& g, int64_t eb, bool input_grad,
               bool weight_grad = true);

// The generated families' convolution: square kernel, padding k/2, no bias (BN follows).
struct Conv2dShape {
  int64_t batch, cin, h, w, cout, k, stride;
  int64_t out_h() const;  // padding k/2, as the builders use
  int64_t out_w() const;
};
LayerCost conv2d(const std::string& name, const Conv2dShape& s, int64_t eb, bool input_grad);

LayerCost batchnorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                    int64_t eb);
LayerCost relu(const std::string& name, double elements, int64_t eb);
// Residual add: out = a + b.
LayerCost add(const std::string& name, double elements, int64_t eb);
LayerCost maxpool(const std::string& name, int64_t batch, int64_t channels, int64_t in_hw,
                  int64_t out_hw, int64_t k, int64_t eb);
LayerCost global_avgpool(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                         int64_t eb);
LayerCost embedding(const std::string& name, double tokens, int64_t vocab, int64_t dim, int64_t eb);
// One stacked recurrent layer over `length` steps; cell is rnn, lstm or gru.
LayerCost recurrent(const std::string& name, const std::string& cell, int64_t batch, int64_t length,
                    int64_t in, int64_t hidden, int64_t eb);
LayerCost softmax_xent(const std::string& name, double rows, int64_t classes, int64_t eb);

// Optimizer FLOPs and bytes per parameter per step, and its state (elements per parameter).
// reads/writes_per_param: each distinct tensor once (a single-tensor loop whose later passes
// over one parameter's tensors find them in cache); pass_reads/pass_writes: every pass of the
// eager update from memory (a multi-tensor update sweeps all parameters once per operation).
struct OptimizerCost {
  double flops_per_param, reads_per_param, writes_per_param, state_per_param;
  double pass_reads_per_param, pass_writes_per_param;
};
OptimizerCost optimizer(const std::string& kind);

// --- Adversarial and reinforcement-learning reference models (wgan_gp, a3c) ---
// Layer norm over (C, H, W) with a per-channel scale and shift: the same arithmetic per
// element as batch norm, over the other axes.
LayerCost layernorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                    int64_t eb);
// Nearest-neighbour 2x upsampling of a batch x channels x h x w input.
LayerCost upsample2(const std::string& name, int64_t batch, int64_t channels, int64_t h, int64_t w,
                    int64_t eb);

// ---- Translation and speech reference models (transformer, seq2seq, deepspeech2) ----

// An element-wise op over `elements` values: `fwd` FLOPs per element forward, `bwd` per
// element for its input gradient, `saved` values per element kept for backward (a dropout
// mask, an activation's input).
LayerCost elementwise(const std::string& name, const std::string& op, double elements, double fwd,
                      double bwd, double saved, int64_t eb);
// LayerNorm over the last `dim` features of `rows` rows: the batch-norm counts per element
// (7 forward, 9 input gradient, 3 for gamma and beta), statistics per row.
LayerCost layernorm(const std::string& name, double rows, int64_t dim, int64_t eb);
// RMSNorm (Zhang and Sennrich 2019) over the last `dim` features, with a scale and no shift:
// x * rsqrt(mean(x^2) + eps) * w. 4 FLOPs per element forward (square, sum, two products), 7
// for the input gradient, 2 for the scale's.
LayerCost rmsnorm(const std::string& name, double rows, int64_t dim, int64_t eb);
// Scaled dot-product attention without its projections: scores = Q K^T over `heads` heads
// (key_dim features in all), `score_ops` FLOPs per score (masks, scales), softmax (5 per
// score, 3 backward), optional dropout of the weights, weights times V (value_dim).
// `q_scale`: the queries are scaled before the product (LibTorch's MultiheadAttention).
LayerCost attention(const std::string& name, int64_t batch, int64_t heads, int64_t q_len,
                    int64_t k_len, int64_t key_dim, int64_t value_dim, double score_ops,
                    bool dropout, bool q_scale, int64_t eb);
// CTC loss over `frames` output frames in all (sum of the utterances' lengths) and
// `lattice` = sum over utterances of frames x (2 x label length + 1) states.
LayerCost ctc(const std::string& name, double frames, double lattice, int64_t classes, int64_t eb);
// A Linear without bias (`tied`: its weight belongs to another layer, e.g. an embedding).
LayerCost linear_nobias(const std::string& name, double rows, int64_t in, int64_t out, int64_t eb,
                        bool input_grad, bool tied = false);
// Scales the work and activations of a layer costed at its padded size to the part that
// is real (packed sequences: `fraction` = real tokens / padded tokens). Weight bytes are
// scaled too, a small overestimate of the saving.
void scale_to_packed(LayerCost& l, double fraction);

// ---- Detection (faster_rcnn, retinanet) ----
// FrozenBatchNorm2d: y = x * scale + shift with fixed per-channel terms.
LayerCost frozen_batchnorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                           int64_t eb, bool input_grad);
// Nearest-neighbour upsampling to `out_elements` outputs (the FPN's top-down path).
LayerCost upsample_nearest(const std::string& name, double out_elements, int64_t eb);
// RoIAlign of `rois` boxes to out x out bins of `sampling`^2 bilinear samples each.
LayerCost roi_align(const std::string& name, double rois, int64_t channels, int64_t out,
                    int64_t sampling, int64_t eb);
// Input normalisation (x - mean) / std, forward only.
LayerCost normalize(const std::string& name, double elements, int64_t eb);

}  // namespace tb::cost

// ---- Image-classification reference models (resnet50, inception3, densenet121,
// mobilenet_v2, squeezenet1_1). In a namespace of their own so that formulas other
// families append cannot collide by name.
namespace tb::cost::vision {

// k x k average pooling (padded positions counted, as count_include_pad): k^2 FLOPs per
// output forward (k^2 - 1 adds, one division) and k^2 backward (spreading dy / k^2).
LayerCost avgpool(const std::string& name, int64_t batch, int64_t channels, int64_t in_hw,
                  int64_t out_hw, int64_t k, int64_t eb);
// Channel concatenation of `elements` elements in all: a copy, no FLOPs; its backward
// hands out views of the gradient (no traffic).
LayerCost concat(const std::string& name, double elements, int64_t eb);
// Training-mode dropout as LibTorch computes it on the CPU: a Bernoulli mask scaled by
// 1/(1-p) (1 FLOP per element), times the input (1); backward multiplies by the mask (1),
// which is kept.
LayerCost dropout(const std::string& name, double elements, int64_t eb);

}  // namespace tb::cost::vision
