#pragma once
// Cost of what the detection families share: the ResNet body with FrozenBatchNorm2d and
// its bottom stages frozen, and torchvision's FPN (docs/models/detection.md).
#include <string>
#include <vector>

#include "cost/layers.h"

namespace tb::cost {

struct DetectionMap {
  int64_t c, h, w;
  bool grad;  // needs a gradient (some parameter below it trains)
};

// Walks a detection model forward, adding layers to `m`.
struct DetectionTracker {
  ModelCost& m;
  int64_t eb, batch;
  // A convolution (padding k/2) with FrozenBatchNorm2d/ReLU handled by the caller.
  DetectionMap conv(const std::string& name, const DetectionMap& in, int64_t cout, int64_t k,
                    int64_t stride, bool trainable, bool bias);
  void frozen_bn(const std::string& name, const DetectionMap& x);
  void relu(const std::string& name, const DetectionMap& x);
  // Forget the parameters of the last layer: heads shared across FPN levels count once.
  void share_params() { m.layers.back().params = 0; }
};

// ResNet-50/101 body with trainable_layers=3 on a batch x 3 x height x width image;
// returns C2..C5.
std::vector<DetectionMap> resnet_body(DetectionTracker& t, const std::vector<int64_t>& layers,
                                      int64_t height, int64_t width);

// torchvision's FPN over `stages` (names inner_blocks.i / layer_blocks.i) with
// LastLevelMaxPool (p6p7 = false) or LastLevelP6P7 from P5; returns its outputs.
std::vector<DetectionMap> fpn(DetectionTracker& t, const std::vector<DetectionMap>& stages,
                              bool p6p7);

// Throws UsageError unless height and width are multiples of 32.
void check_detection_size(int64_t height, int64_t width);

}  // namespace tb::cost
