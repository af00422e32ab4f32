// RetinaNet with a ResNet-50-FPN backbone, trained as torchvision 0.14's
// retinanet_resnet50_fpn is: FrozenBatchNorm2d backbone with its top three stages
// trainable, FPN P3-P5 plus P6/P7 from P5, 9 anchors per location, a four-convolution
// classification head with the sigmoid focal loss (alpha 0.25, gamma 2) and a regression
// head with the L1 loss, both normalised by the number of foreground anchors.
#include <cmath>

#include "model/activation_point.h"
#include "model/detection_common.h"
#include "model/detection_ops.h"
#include "model/resnet.h"

namespace tb {
namespace {
namespace nn = torch::nn;
using torch::Tensor;

constexpr int64_t kClasses = 91, kAnchors = 9;

// Four 3x3 convolutions with ReLU, then the predictor; normal(0.01) weights.
struct HeadImpl : nn::Module {
  HeadImpl(int64_t outputs, double prior_bias, const char* predictor) {
    for (int i = 0; i < 4; ++i) {
      auto c = nn::Conv2d(nn::Conv2dOptions(256, 256, 3).padding(1));
      nn::init::normal_(c->weight, 0.0, 0.01);
      nn::init::zeros_(c->bias);
      conv->push_back(nn::Sequential(c, nn::ReLU()));  // torchvision's Conv2dNormActivation
    }
    register_module("conv", conv);
    out = register_module(predictor, nn::Conv2d(nn::Conv2dOptions(256, outputs, 3).padding(1)));
    nn::init::normal_(out->weight, 0.0, 0.01);
    nn::init::constant_(out->bias, prior_bias);
  }
  // [N, H*W*anchors, per_anchor] over all levels, as torchvision flattens them.
  Tensor forward(const std::vector<Tensor>& features, int64_t per_anchor) {
    std::vector<Tensor> all;
    for (const auto& f : features) {
      auto y = f;
      for (const auto& block : *conv) {
        nn::Sequential s(std::dynamic_pointer_cast<nn::SequentialImpl>(block));
        y = forward_with_points(s, y);
      }
      y = layer_op(out, y);
      const int64_t N = y.size(0), H = y.size(2), W = y.size(3);
      all.push_back(
          y.view({N, -1, per_anchor, H, W}).permute({0, 3, 4, 1, 2}).reshape({N, -1, per_anchor}));
    }
    return torch::cat(all, 1);
  }
  nn::ModuleList conv;
  nn::Conv2d out{nullptr};
};
TORCH_MODULE(Head);

struct RetinaNetImpl : nn::Module {
  RetinaNetImpl() {
    ResNetOptions o;
    o.frozen_bn = true;
    o.num_classes = 0;
    o.trainable_stages = 3;
    auto backbone = register_module("backbone", std::make_shared<nn::Module>());
    body = backbone->register_module("body", ResNet(o));
    fpn = backbone->register_module(
        "fpn", det::Fpn(std::vector<int64_t>{512, 1024, 2048}, 256, det::FpnExtra::kP6P7));
    auto head = register_module("head", std::make_shared<nn::Module>());
    // The classifier starts at foreground probability 0.01 (the focal-loss prior).
    cls = head->register_module(
        "classification_head",
        Head(kAnchors * kClasses, -std::log((1 - 0.01) / 0.01), "cls_logits"));
    reg = head->register_module("regression_head", Head(kAnchors * 4, 0.0, "bbox_reg"));
    for (double x : {32.0, 64.0, 128.0, 256.0, 512.0}) {
      anchors.sizes.push_back({x, double(int64_t(x * std::pow(2.0, 1.0 / 3))),
                               double(int64_t(x * std::pow(2.0, 2.0 / 3)))});
      anchors.ratios.push_back({0.5, 1.0, 2.0});
    }
  }
  ResNet body{nullptr};
  det::Fpn fpn{nullptr};
  Head cls{nullptr}, reg{nullptr};
  det::AnchorGenerator anchors;
};
TORCH_MODULE(RetinaNet);

class RetinaNetWorkload : public Workload {
 public:
  explicit RetinaNetWorkload(const Config& c) : data_(c) { det::calibrate_frozen_bn(*net_->body); }
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
    auto c = net_->body->stages(det::normalize(images));
    auto p = net_->fpn->forward({c[1], c[2], c[3]});  // P3..P7
    auto logits = activation_point(net_->cls->forward(p, kClasses)).to(torch::kFloat);
    auto deltas = activation_point(net_->reg->forward(p, 4)).to(torch::kFloat);
    std::vector<std::array<int64_t, 2>> sizes;
    for (const auto& f : p) sizes.push_back({f.size(2), f.size(3)});
    auto anchors = net_->anchors.grid_anchors(H, W, sizes).to(logits.device());

    det::BoxCoder coder;  // weights (1, 1, 1, 1)
    Tensor cls_loss = torch::zeros({}, logits.options()), box_loss = cls_loss;
    for (int64_t i = 0; i < N; ++i) {
      auto m = det::match(det::box_iou(t.boxes[i], anchors), 0.5, 0.4, true);
      auto fg = torch::where(m >= 0)[0];
      const double n_fg = std::max<double>(1.0, double(fg.numel()));
      auto gt_index = m.index_select(0, fg);
      auto target = torch::zeros_like(logits[i]);
      target.index_put_({fg, t.labels[i].index_select(0, gt_index)}, 1.0);
      auto valid = torch::where(m != det::kBetween)[0];
      cls_loss = cls_loss +
                 focal_loss(logits[i].index_select(0, valid), target.index_select(0, valid)) / n_fg;
      auto want = coder.encode(t.boxes[i].index_select(0, gt_index), anchors.index_select(0, fg));
      box_loss =
          box_loss + torch::l1_loss(deltas[i].index_select(0, fg), want, at::Reduction::Sum) / n_fg;
    }
    return (cls_loss + box_loss) / double(N);
  }

 private:
  // torchvision.ops.sigmoid_focal_loss, alpha 0.25, gamma 2, summed.
  static Tensor focal_loss(const Tensor& x, const Tensor& y) {
    auto p = torch::sigmoid(x);
    auto ce = torch::binary_cross_entropy_with_logits(x, y, {}, {}, at::Reduction::None);
    auto p_t = p * y + (1 - p) * (1 - y);
    auto alpha_t = 0.25 * y + 0.75 * (1 - y);
    return (alpha_t * ce * (1 - p_t).pow(2)).sum();
  }

  det::DetectionData data_;
  RetinaNet net_;
};

const bool retinanet_registered =
    (register_builder("retinanet",
                      [](const Config& c) { return std::make_unique<RetinaNetWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
