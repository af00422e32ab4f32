#pragma once
// What the detection families share: torchvision's FeaturePyramidNetwork, the synthetic
// COCO-shaped data and the input normalisation of GeneralizedRCNNTransform.
#include <torch/torch.h>

#include <vector>

#include "model/resnet.h"
#include "model/workload.h"
#include "spec/config.h"

namespace tb::det {

// torchvision's FeaturePyramidNetwork: 1x1 lateral and 3x3 output convolutions (with
// bias) over the given backbone stages, top-down nearest upsampling, then either
// LastLevelMaxPool (one extra level, Faster R-CNN) or LastLevelP6P7 from P5 (RetinaNet).
enum class FpnExtra { kMaxPool, kP6P7 };
struct FpnImpl : torch::nn::Module {
  FpnImpl(const std::vector<int64_t>& in_channels, int64_t out_channels, FpnExtra extra);
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& x);
  torch::nn::ModuleList inner_blocks, layer_blocks;
  torch::nn::Conv2d p6{nullptr}, p7{nullptr};
  FpnExtra extra;
};
TORCH_MODULE(Fpn);

// One image's boxes and labels (1..90, COCO's 91 classes with background 0).
struct Targets {
  std::vector<torch::Tensor> boxes, labels;
};

// Random images in [0, 1) at the configured size and, per image, 1..max_boxes random
// valid boxes with random labels, all from `seed`. Layout of Batch: inputs = {images,
// boxes_0, labels_0, boxes_1, labels_1, ...}; target = the number of boxes per image.
class DetectionData {
 public:
  explicit DetectionData(const Config& c);
  Batch make(torch::Device device, torch::Dtype dtype, uint64_t seed) const;
  static Targets targets(const Batch& b);
  int64_t batch, height, width, max_boxes;
};

// GeneralizedRCNNTransform's normalisation with ImageNet's mean and std. Its resizing
// is left out: images are generated at the target size (docs/models/detection.md).
torch::Tensor normalize(const torch::Tensor& images);

// Stands in for an ImageNet-pretrained backbone's FrozenBatchNorm2d statistics: sets each
// one's mean and variance to those of its input on a small batch of random images, layer
// by layer. With the identity statistics of a fresh FrozenBatchNorm2d the activations of
// a randomly initialised ResNet grow ~50x by C5, the RPN's box deltas saturate, proposals
// collapse onto the whole image and NMS leaves far fewer than the 512 RoIs per image a
// real (pretrained) training step samples.
void calibrate_frozen_bn(ResNetImpl& net);

}  // namespace tb::det
