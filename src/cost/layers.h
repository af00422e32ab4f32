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
LayerCost embedding(const std::string& name, double tokens, int64_t vocab, int64_t dim,
                    int64_t eb);
// One stacked recurrent layer over `length` steps; cell is rnn, lstm or gru.
LayerCost recurrent(const std::string& name, const std::string& cell, int64_t batch,
                    int64_t length, int64_t in, int64_t hidden, int64_t eb);
LayerCost softmax_xent(const std::string& name, double rows, int64_t classes, int64_t eb);

// Optimizer FLOPs and bytes per parameter per step, and its state (elements per parameter).
struct OptimizerCost {
  double flops_per_param, reads_per_param, writes_per_param, state_per_param;
};
OptimizerCost optimizer(const std::string& kind);

// ---- Translation and speech reference models (transformer, seq2seq, deepspeech2) ----

// An element-wise op over `elements` values: `fwd` FLOPs per element forward, `bwd` per
// element for its input gradient, `saved` values per element kept for backward (a dropout
// mask, an activation's input).
LayerCost elementwise(const std::string& name, const std::string& op, double elements,
                      double fwd, double bwd, double saved, int64_t eb);
// LayerNorm over the last `dim` features of `rows` rows: the batch-norm counts per element
// (7 forward, 9 input gradient, 3 for gamma and beta), statistics per row.
LayerCost layernorm(const std::string& name, double rows, int64_t dim, int64_t eb);
// Scaled dot-product attention without its projections: scores = Q K^T over `heads` heads
// (key_dim features in all), `score_ops` FLOPs per score (masks, scales), softmax (5 per
// score, 3 backward), optional dropout of the weights, weights times V (value_dim).
// `q_scale`: the queries are scaled before the product (LibTorch's MultiheadAttention).
LayerCost attention(const std::string& name, int64_t batch, int64_t heads, int64_t q_len,
                    int64_t k_len, int64_t key_dim, int64_t value_dim, double score_ops,
                    bool dropout, bool q_scale, int64_t eb);
// Conv2d with a kh x kw kernel, stride (sh, sw), padding (kh/2, kw/2), no bias.
LayerCost conv2d_rect(const std::string& name, int64_t batch, int64_t cin, int64_t h, int64_t w,
                      int64_t cout, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t eb,
                      bool input_grad);
// CTC loss over `frames` output frames in all (sum of the utterances' lengths) and
// `lattice` = sum over utterances of frames x (2 x label length + 1) states.
LayerCost ctc(const std::string& name, double frames, double lattice, int64_t classes, int64_t eb);
// A Linear without bias (`tied`: its weight belongs to another layer, e.g. an embedding).
LayerCost linear_nobias(const std::string& name, double rows, int64_t in, int64_t out,
                        int64_t eb, bool input_grad, bool tied = false);
// Scales the work and activations of a layer costed at its padded size to the part that
// is real (packed sequences: `fraction` = real tokens / padded tokens). Weight bytes are
// scaled too, a small overestimate of the saving.
void scale_to_packed(LayerCost& l, double fraction);

}  // namespace tb::cost
