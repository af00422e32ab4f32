// Schema and cost description of retinanet (model/retinanet.cc): the backbone, FPN P3-P7 and both
// heads on every level. Left out: anchor matching, box encoding and the focal and L1
// losses (element-wise work over anchors x classes, small next to the heads).
#include <fmt/format.h>

#include "cost/detection_backbone.h"
#include "cost/family_schemas.h"
#include "spec/family.h"

namespace tb {
namespace {

constexpr int64_t kClasses = 91, kAnchorsPerLocation = 9;

ModelCost retinanet_cost(const Config& cfg, int64_t eb) {
  const int64_t B = cfg.get_int("batch"), H = cfg.get_int("height"), W = cfg.get_int("width");
  cost::check_detection_size(H, W);
  ModelCost m;
  cost::DetectionTracker t{m, eb, B};
  m.layers.push_back(cost::normalize("transform.normalize", double(B) * 3 * H * W, eb));
  auto c = cost::resnet_body(t, {3, 4, 6, 3}, H, W);
  auto p = cost::fpn(t, {c[1], c[2], c[3]}, /*p6p7=*/true);
  for (const auto& [head, outputs] :
       {std::pair{"classification_head", kAnchorsPerLocation * kClasses},
        std::pair{"regression_head", kAnchorsPerLocation * 4}}) {
    for (size_t l = 0; l < p.size(); ++l) {
      cost::DetectionMap x = p[l];
      // One head shared by all levels: its parameters count once.
      for (int i = 0; i < 4; ++i) {
        x = t.conv(fmt::format("head.{}.conv.{}.0@P{}", head, i, l + 3), x, 256, 3, 1, true, true);
        if (l > 0) t.share_params();
        t.relu(fmt::format("head.{}.conv.{}.1@P{}", head, i, l + 3), x);
      }
      t.conv(fmt::format("head.{}.{}@P{}", head,
                         outputs == 4 * kAnchorsPerLocation ? "bbox_reg" : "cls_logits", l + 3),
             x, outputs, 3, 1, true, true);
      if (l > 0) t.share_params();
    }
  }
  m.input_bytes = double(B) * 3 * H * W * eb + double(B) * cfg.get_int("max_boxes") * (16 + 8);
  return m;
}

FamilySchema retinanet_schema() {
  return detection_schema(
      "retinanet",
      "RetinaNet with a ResNet-50-FPN backbone (P3-P7) as torchvision 0.14 trains it, on "
      "synthetic COCO-shaped images and boxes (91 classes)",
      {}, "retinanet:height=800,width=1088,max_boxes=14,batch=2,dtype=fp32");
}

const bool registered =
    (register_family_schema(retinanet_schema()), register_cost("retinanet", retinanet_cost), true);

}  // namespace
}  // namespace tb
