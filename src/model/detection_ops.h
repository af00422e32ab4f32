#pragma once
// The detection operators LibTorch lacks, with torchvision 0.14's semantics (torchvision.ops
// and torchvision.models.detection._utils / anchor_utils / poolers), written over tensors so
// that autograd reaches the features where torchvision's do. Boxes are (x1, y1, x2, y2).
#include <torch/torch.h>

#include <array>
#include <vector>

namespace tb::det {

torch::Tensor box_area(const torch::Tensor& boxes);
// Pairwise IoU, [N, M].
torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b);
torch::Tensor clip_boxes_to_image(const torch::Tensor& boxes, int64_t height, int64_t width);
// Indices of the boxes whose sides are both at least min_size.
torch::Tensor remove_small_boxes(const torch::Tensor& boxes, double min_size);

// Greedy NMS: indices of the kept boxes, by decreasing score. A box is dropped when its IoU
// with a kept one is strictly above the threshold.
torch::Tensor nms(const torch::Tensor& boxes, const torch::Tensor& scores, double iou_threshold);
// NMS within each category of `idxs` only.
torch::Tensor batched_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                          const torch::Tensor& idxs, double iou_threshold);

// Regression targets relative to reference boxes (torchvision's BoxCoder).
struct BoxCoder {
  std::array<double, 4> weights{1, 1, 1, 1};
  double clip = 4.135166556742356;  // log(1000 / 16): caps exp() of the size deltas
  // Deltas that turn `anchors` into `boxes`, [N, 4].
  torch::Tensor encode(const torch::Tensor& boxes, const torch::Tensor& anchors) const;
  // Boxes from deltas [N, 4k] (k boxes per anchor), [N, 4k].
  torch::Tensor decode(const torch::Tensor& deltas, const torch::Tensor& anchors) const;
};

// Anchors of one size set and ratio set per feature level (torchvision's AnchorGenerator).
struct AnchorGenerator {
  std::vector<std::vector<double>> sizes;   // per level
  std::vector<std::vector<double>> ratios;  // per level
  int64_t anchors_per_location(size_t level) const;
  // Centred anchors of one level, [sizes x ratios, 4], ratio-major, rounded.
  torch::Tensor cell_anchors(size_t level) const;
  // All anchors of an image, level after level, location-major (row, column, anchor),
  // the order the heads' outputs are flattened in. Strides are image size // feature size.
  torch::Tensor grid_anchors(int64_t image_h, int64_t image_w,
                             const std::vector<std::array<int64_t, 2>>& feature_sizes) const;
};

// RoIAlign (aligned=false): rois are [K, 5] (batch index, x1, y1, x2, y2) in image
// coordinates; the output is [K, C, out_h, out_w]. Differentiable with respect to input.
torch::Tensor roi_align(const torch::Tensor& input, const torch::Tensor& rois, int64_t out_h,
                        int64_t out_w, double spatial_scale, int64_t sampling_ratio);

// FPN level (0-based from k_min) of each box: floor(4 + log2(sqrt(area) / 224) + 1e-6),
// clamped to [k_min, k_max] (torchvision's LevelMapper).
torch::Tensor map_levels(const torch::Tensor& boxes, int64_t k_min, int64_t k_max);

// MultiScaleRoIAlign over feature levels; scales are inferred as powers of two from the
// feature and image sizes. `boxes` is one [n_i, 4] tensor per image.
torch::Tensor multiscale_roi_align(const std::vector<torch::Tensor>& features,
                                   const std::vector<torch::Tensor>& boxes, int64_t image_h,
                                   int64_t image_w, int64_t output, int64_t sampling_ratio);

// Assigns each prediction (column of an IoU matrix [gt, pred]) its gt index, or -1 (below
// low) / -2 (between the thresholds); optionally keeps every prediction that is some gt's
// best match (torchvision's Matcher).
constexpr int64_t kBelowLow = -1, kBetween = -2;
torch::Tensor match(const torch::Tensor& iou, double high, double low, bool allow_low_quality);

// Balanced sampling of labels (>= 1 positive, 0 negative, -1 ignored): returns the positive
// and negative index tensors, at most `per_image` in all, at most that x fraction positive.
std::pair<torch::Tensor, torch::Tensor> sample_balanced(const torch::Tensor& labels,
                                                        int64_t per_image, double fraction);

}  // namespace tb::det
