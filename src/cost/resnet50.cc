// Schema and cost description of resnet50 (model/resnet50.cc, model/resnet.cc); layer names are the
// module names.
#include <fmt/format.h>

#include "cost/family_schemas.h"
#include "cost/image_net.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost resnet50_cost(const Config& cfg, int64_t eb) {
  ModelCost m;
  cost::ImageNet n(m, cfg.get_int("batch"), eb);
  auto x = n.images(cfg.get_int("image"));
  x = n.relu("relu", n.bn("bn1", n.conv("conv1", x, 64, 7, 2, 3)));
  x = n.maxpool("maxpool", x, 3, 2, 1);
  const int64_t blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = 64 << s;
    for (int64_t b = 0; b < blocks[s]; ++b) {
      const std::string p = fmt::format("layer{}.{}.", s + 1, b);
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      auto y = n.relu(p + "relu1", n.bn(p + "bn1", n.conv(p + "conv1", x, planes, 1)));
      y = n.relu(p + "relu2", n.bn(p + "bn2", n.conv(p + "conv2", y, planes, 3, stride, 1)));
      y = n.bn(p + "bn3", n.conv(p + "conv3", y, 4 * planes, 1));
      if (b == 0) n.bn(p + "downsample.1", n.conv(p + "downsample.0", x, 4 * planes, 1, stride));
      x = n.relu(p + "relu3", n.add(p + "add", y));
    }
  }
  x = n.global_avgpool("avgpool", x);
  n.softmax_xent("loss", n.linear("fc", x, cfg.get_int("classes")));
  return m;
}

const bool registered =
    (register_family_schema(image_classifier_schema(
         "resnet50", "ResNet-50 v1.5 (torchvision), 25.6M parameters", 224, 32, "momentum")),
     register_cost("resnet50", resnet50_cost), true);

}  // namespace
}  // namespace tb
