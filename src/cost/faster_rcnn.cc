// Schema and cost description of faster_rcnn (model/faster_rcnn.cc): the backbone, FPN, the RPN
// head on every level and the RoI heads on 512 sampled RoIs per image, the number torchvision
// samples whenever an image has at least 512 proposals. Left out: anchor matching,
// proposal decoding, NMS, sampling and the box losses (data-dependent index work).
#include <fmt/format.h>

#include "cost/detection_backbone.h"
#include "cost/family_schemas.h"
#include "spec/family.h"

namespace tb {
namespace {

constexpr int64_t kRoisPerImage = 512, kClasses = 91, kAnchorsPerLocation = 3;

ModelCost faster_rcnn_cost(const Config& cfg, int64_t eb) {
  const int64_t B = cfg.get_int("batch"), H = cfg.get_int("height"), W = cfg.get_int("width");
  cost::check_detection_size(H, W);
  const std::vector<int64_t> layers = cfg.get("backbone") == "resnet101"
                                          ? std::vector<int64_t>{3, 4, 23, 3}
                                          : std::vector<int64_t>{3, 4, 6, 3};
  ModelCost m;
  cost::DetectionTracker t{m, eb, B};
  m.layers.push_back(cost::normalize("transform.normalize", double(B) * 3 * H * W, eb));
  auto c = cost::resnet_body(t, layers, H, W);
  auto p = cost::fpn(t, c, /*p6p7=*/false);
  for (size_t l = 0; l < p.size(); ++l) {
    // One head shared by all levels: its parameters count once.
    auto h = t.conv(fmt::format("rpn.head.conv.0.0@P{}", l + 2), p[l], 256, 3, 1, true, true);
    if (l > 0) t.share_params();
    t.relu(fmt::format("rpn.head.relu@P{}", l + 2), h);
    t.conv(fmt::format("rpn.head.cls_logits@P{}", l + 2), h, kAnchorsPerLocation, 1, 1, true, true);
    if (l > 0) t.share_params();
    t.conv(fmt::format("rpn.head.bbox_pred@P{}", l + 2), h, 4 * kAnchorsPerLocation, 1, 1, true,
           true);
    if (l > 0) t.share_params();
  }
  const double R = double(B) * kRoisPerImage;
  m.layers.push_back(cost::roi_align("roi_heads.box_roi_pool", R, 256, 7, 2, eb));
  m.layers.push_back(cost::linear("roi_heads.box_head.fc6", R, 256 * 7 * 7, 1024, eb, true));
  m.layers.push_back(cost::relu("roi_heads.box_head.relu6", R * 1024, eb));
  m.layers.back().saved_bytes += m.layers.back().output_bytes;
  m.layers.push_back(cost::linear("roi_heads.box_head.fc7", R, 1024, 1024, eb, true));
  m.layers.push_back(cost::relu("roi_heads.box_head.relu7", R * 1024, eb));
  m.layers.back().saved_bytes += m.layers.back().output_bytes;
  m.layers.push_back(
      cost::linear("roi_heads.box_predictor.cls_score", R, 1024, kClasses, eb, true));
  m.layers.push_back(
      cost::linear("roi_heads.box_predictor.bbox_pred", R, 1024, 4 * kClasses, eb, true));
  m.layers.push_back(cost::softmax_xent("roi_heads.loss_classifier", R, kClasses, eb));
  // Images plus up to max_boxes boxes (4 floats) and labels (int64) per image.
  m.input_bytes = double(B) * 3 * H * W * eb + double(B) * cfg.get_int("max_boxes") * (16 + 8);
  return m;
}

FamilySchema faster_rcnn_schema() {
  return detection_schema(
      "faster_rcnn",
      "Faster R-CNN with a ResNet-FPN backbone as torchvision 0.14 trains it, on synthetic "
      "COCO-shaped images and boxes (91 classes)",
      {{"backbone",
        "ResNet depth of the FPN backbone",
        "resnet50",
        0,
        0,
        {"resnet50", "resnet101"}}},
      "faster_rcnn:backbone=resnet50,height=800,width=1088,max_boxes=14,batch=2,dtype=fp32");
}

const bool registered = (register_family_schema(faster_rcnn_schema()),
                         register_cost("faster_rcnn", faster_rcnn_cost), true);

}  // namespace
}  // namespace tb
