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

// ---- Detection (faster_rcnn, retinanet) ----
// A convolution that may have a bias (FPN, detection heads) and frozen weights (the
// detection backbones' bottom stages): no weight gradient when !weight_grad.
LayerCost conv2d_ext(const std::string& name, const Conv2dShape& s, int64_t eb, bool input_grad,
                     bool weight_grad, bool bias);
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
