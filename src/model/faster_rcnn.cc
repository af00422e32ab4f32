// Faster R-CNN with a ResNet-FPN backbone, trained as torchvision 0.14's
// fasterrcnn_resnet50_fpn is (TBD's object detection model; ResNet-101 as TBD used it):
// an ImageNet-pretrained backbone with FrozenBatchNorm2d and its top three stages
// trainable, FPN P2-P5 + max-pooled P6, an RPN over 3 anchors per location and RoI heads
// on 512 sampled proposals per image. Loss = RPN objectness + RPN box + classifier + box.
#include "model/activation_point.h"
#include "model/detection_common.h"
#include "model/detection_ops.h"
#include "model/resnet.h"

namespace tb {
namespace {
namespace nn = torch::nn;
namespace F = torch::nn::functional;
using torch::Tensor;

struct RpnHeadImpl : nn::Module {
  RpnHeadImpl(int64_t channels, int64_t anchors) {
    // torchvision names: conv.0.0 (Conv2dNormActivation inside a Sequential).
    conv = nn::Conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1));
    register_module("conv", nn::ModuleList(nn::Sequential(conv)));
    cls_logits = register_module("cls_logits", nn::Conv2d(nn::Conv2dOptions(channels, anchors, 1)));
    bbox_pred =
        register_module("bbox_pred", nn::Conv2d(nn::Conv2dOptions(channels, 4 * anchors, 1)));
    for (auto* c : {&conv, &cls_logits, &bbox_pred}) {
      nn::init::normal_((*c)->weight, 0.0, 0.01);
      nn::init::zeros_((*c)->bias);
    }
  }
  nn::Conv2d conv{nullptr}, cls_logits{nullptr}, bbox_pred{nullptr};
};
TORCH_MODULE(RpnHead);

struct BackboneImpl : nn::Module {
  BackboneImpl(const std::vector<int64_t>& layers) {
    ResNetOptions o;
    o.layers = layers;
    o.frozen_bn = true;
    o.num_classes = 0;
    o.trainable_stages = 3;
    body = register_module("body", ResNet(o));
    fpn = register_module(
        "fpn", det::Fpn(std::vector<int64_t>{256, 512, 1024, 2048}, 256, det::FpnExtra::kMaxPool));
  }
  ResNet body{nullptr};
  det::Fpn fpn{nullptr};
};
TORCH_MODULE(Backbone);

struct RoiHeadsImpl : nn::Module {
  RoiHeadsImpl(int64_t classes) {
    auto head = register_module("box_head", std::make_shared<nn::Module>());
    fc6 = head->register_module("fc6", nn::Linear(256 * 7 * 7, 1024));
    fc7 = head->register_module("fc7", nn::Linear(1024, 1024));
    auto pred = register_module("box_predictor", std::make_shared<nn::Module>());
    cls_score = pred->register_module("cls_score", nn::Linear(1024, classes));
    bbox_pred = pred->register_module("bbox_pred", nn::Linear(1024, 4 * classes));
  }
  nn::Linear fc6{nullptr}, fc7{nullptr}, cls_score{nullptr}, bbox_pred{nullptr};
};
TORCH_MODULE(RoiHeads);

struct FasterRcnnImpl : nn::Module {
  explicit FasterRcnnImpl(const std::vector<int64_t>& layers) {
    backbone = register_module("backbone", Backbone(layers));
    auto rpn = register_module("rpn", std::make_shared<nn::Module>());
    rpn_head = rpn->register_module("head", RpnHead(256, 3));
    roi_heads = register_module("roi_heads", RoiHeads(91));
    anchors.sizes = {{32}, {64}, {128}, {256}, {512}};
    anchors.ratios.assign(5, {0.5, 1.0, 2.0});
  }
  Backbone backbone{nullptr};
  RpnHead rpn_head{nullptr};
  RoiHeads roi_heads{nullptr};
  det::AnchorGenerator anchors;
};
TORCH_MODULE(FasterRcnn);

// torchvision's training settings.
constexpr int64_t kPreNmsTopN = 2000, kPostNmsTopN = 2000;
constexpr double kRpnNms = 0.7, kMinSize = 1e-3;
constexpr double kSmoothL1Beta = 1.0 / 9;

class FasterRcnnWorkload : public Workload {
 public:
  explicit FasterRcnnWorkload(const Config& c)
      : data_(c),
        net_(c.get("backbone") == "resnet101" ? std::vector<int64_t>{3, 4, 23, 3}
                                              : std::vector<int64_t>{3, 4, 6, 3}) {
    det::calibrate_frozen_bn(*net_->backbone->body);
  }
  nn::Module& module() override { return *net_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    return data_.make(device, dtype, seed);
  }
  int64_t examples_per_step() const override { return data_.batch; }
  bool has_activation_points() const override { return true; }

  Tensor loss(const Batch& b) override {
    const auto t = det::DetectionData::targets(b);
    const auto& images = b.inputs[0];
    const int64_t N = images.size(0), H = images.size(2), W = images.size(3);
    auto c = net_->backbone->body->stages(det::normalize(images));
    auto p = net_->backbone->fpn->forward(c);  // P2..P5, pool

    // RPN head over every level, flattened as (image, row, column, anchor).
    std::vector<Tensor> obj, reg;
    std::vector<std::array<int64_t, 2>> sizes;
    std::vector<int64_t> per_level;
    auto& head = *net_->rpn_head;
    for (const auto& f : p) {
      auto h = relu_op(layer_op(head.conv, f));
      obj.push_back(
          activation_point(layer_op(head.cls_logits, h)).permute({0, 2, 3, 1}).reshape({N, -1}));
      reg.push_back(activation_point(layer_op(head.bbox_pred, h))
                        .view({N, -1, 4, f.size(2), f.size(3)})
                        .permute({0, 3, 4, 1, 2})
                        .reshape({N, -1, 4}));
      sizes.push_back({f.size(2), f.size(3)});
      per_level.push_back(obj.back().size(1));
    }
    auto objectness = torch::cat(obj, 1), deltas = torch::cat(reg, 1);
    auto anchors = net_->anchors.grid_anchors(H, W, sizes).to(objectness.device());
    const int64_t A = anchors.size(0);

    det::BoxCoder rpn_coder;  // weights (1, 1, 1, 1)
    auto proposals =
        rpn_coder.decode(deltas.detach().reshape({-1, 4}).to(torch::kFloat), anchors.repeat({N, 1}))
            .view({N, A, 4});
    std::vector<Tensor> props =
        filter_proposals(proposals, objectness.detach().to(torch::kFloat), per_level, H, W);

    // RPN losses on 256 sampled anchors per image.
    std::vector<Tensor> rpn_labels, rpn_targets, pos_all, neg_all;
    for (int64_t i = 0; i < N; ++i) {
      auto m = det::match(det::box_iou(t.boxes[i], anchors), 0.7, 0.3, true);
      auto labels = (m >= 0).to(torch::kFloat);
      labels.masked_fill_(m == det::kBetween, -1);
      rpn_targets.push_back(rpn_coder.encode(t.boxes[i].index_select(0, m.clamp_min(0)), anchors));
      rpn_labels.push_back(labels);
      auto [pos, neg] = det::sample_balanced(labels, 256, 0.5);
      pos_all.push_back(pos + i * A);
      neg_all.push_back(neg + i * A);
    }
    auto pos = torch::cat(pos_all), sampled = torch::cat({pos, torch::cat(neg_all)});
    auto flat_deltas = deltas.reshape({-1, 4}).to(torch::kFloat);
    auto rpn_box = torch::smooth_l1_loss(flat_deltas.index_select(0, pos),
                                         torch::cat(rpn_targets).index_select(0, pos),
                                         at::Reduction::Sum, kSmoothL1Beta) /
                   double(sampled.numel());
    auto rpn_obj = F::binary_cross_entropy_with_logits(
        objectness.reshape(-1).to(torch::kFloat).index_select(0, sampled),
        torch::cat(rpn_labels).index_select(0, sampled));

    // RoI heads: proposals plus the ground truth, 512 sampled per image, a quarter
    // positive at most.
    det::BoxCoder roi_coder{{10, 10, 5, 5}};
    std::vector<Tensor> rois, labels, targets;
    for (int64_t i = 0; i < N; ++i) {
      auto cand = torch::cat({props[i], t.boxes[i].to(torch::kFloat)});
      auto m = det::match(det::box_iou(t.boxes[i], cand), 0.5, 0.5, false);
      auto l = t.labels[i].index_select(0, m.clamp_min(0));
      l.masked_fill_(m == det::kBelowLow, 0);
      l.masked_fill_(m == det::kBetween, -1);
      auto [sp, sn] = det::sample_balanced(l, 512, 0.25);
      auto keep = torch::cat({sp, sn});
      auto r = cand.index_select(0, keep);
      rois.push_back(r);
      labels.push_back(l.index_select(0, keep));
      targets.push_back(
          roi_coder.encode(t.boxes[i].index_select(0, m.index_select(0, keep).clamp_min(0)), r));
    }
    std::vector<Tensor> levels(p.begin(), p.begin() + 4);  // the pool level is the RPN's only
    auto pooled = det::multiscale_roi_align(levels, rois, H, W, 7, 2);
    auto& rh = *net_->roi_heads;
    auto x = relu_op(layer_op(rh.fc6, pooled.flatten(1)));
    x = relu_op(layer_op(rh.fc7, x));
    auto class_logits = activation_point(layer_op(rh.cls_score, x)).to(torch::kFloat);
    auto box_regression = activation_point(layer_op(rh.bbox_pred, x)).to(torch::kFloat);
    auto all_labels = torch::cat(labels), all_targets = torch::cat(targets);
    auto cls_loss = F::cross_entropy(class_logits, all_labels);
    auto fg = torch::where(all_labels > 0)[0];
    auto fg_boxes = box_regression.view({box_regression.size(0), -1, 4})
                        .index({fg, all_labels.index_select(0, fg)});
    auto box_loss = torch::smooth_l1_loss(fg_boxes, all_targets.index_select(0, fg),
                                          at::Reduction::Sum, kSmoothL1Beta) /
                    double(all_labels.numel());
    return rpn_obj + rpn_box + cls_loss + box_loss;
  }

 private:
  // Top 2000 per level by objectness, clipped, small boxes dropped, NMS 0.7 per level,
  // the best 2000 kept (torchvision's filter_proposals; score threshold 0).
  std::vector<Tensor> filter_proposals(const Tensor& proposals, const Tensor& objectness,
                                       const std::vector<int64_t>& per_level, int64_t H,
                                       int64_t W) {
    const int64_t N = proposals.size(0);
    std::vector<Tensor> idx, lvl;
    int64_t offset = 0;
    for (size_t l = 0; l < per_level.size(); ++l) {
      const int64_t n = per_level[l];
      auto top = std::get<1>(objectness.narrow(1, offset, n).topk(std::min(kPreNmsTopN, n), 1));
      idx.push_back(top + offset);
      lvl.push_back(torch::full({top.size(1)}, int64_t(l), torch::kLong));
      offset += n;
    }
    auto top_idx = torch::cat(idx, 1);
    auto levels = torch::cat(lvl);
    std::vector<Tensor> out;
    for (int64_t i = 0; i < N; ++i) {
      auto boxes = proposals[i].index_select(0, top_idx[i]);
      auto scores = torch::sigmoid(objectness[i].index_select(0, top_idx[i]));
      boxes = det::clip_boxes_to_image(boxes, H, W);
      auto keep = det::remove_small_boxes(boxes, kMinSize);
      boxes = boxes.index_select(0, keep), scores = scores.index_select(0, keep);
      auto lv = levels.index_select(0, keep);
      keep = det::batched_nms(boxes, scores, lv, kRpnNms).slice(0, 0, kPostNmsTopN);
      out.push_back(boxes.index_select(0, keep));
    }
    return out;
  }

  det::DetectionData data_;
  FasterRcnn net_;
};

const bool faster_rcnn_registered =
    (register_builder("faster_rcnn",
                      [](const Config& c) { return std::make_unique<FasterRcnnWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
