// Schema and cost description of densenet121 (model/densenet121.cc); layer names are the module
// names. Every dense layer concatenates all earlier feature maps of its block again, so
// the copies grow quadratically with the block's depth.
#include <fmt/format.h>

#include "cost/family_schemas.h"
#include "cost/image_net.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost densenet121_cost(const Config& cfg, int64_t eb) {
  const int64_t growth = 32, bn_size = 4;
  const int64_t blocks[] = {6, 12, 24, 16};
  ModelCost m;
  cost::ImageNet n(m, cfg.get_int("batch"), eb);
  auto x = n.images(cfg.get_int("image"));
  x = n.relu("features.relu0", n.bn("features.norm0", n.conv("features.conv0", x, 64, 7, 2, 3)));
  x = n.maxpool("features.pool0", x, 3, 2, 1);
  for (int b = 0; b < 4; ++b) {
    std::vector<cost::FeatureMap> maps{x};
    for (int64_t l = 0; l < blocks[b]; ++l) {
      const std::string p = fmt::format("features.denseblock{}.denselayer{}.", b + 1, l + 1);
      auto y = n.cat(p + "cat", maps);
      y = n.relu(p + "relu1", n.bn(p + "norm1", y));
      y = n.conv(p + "conv1", y, bn_size * growth, 1);
      y = n.relu(p + "relu2", n.bn(p + "norm2", y));
      maps.push_back(n.conv(p + "conv2", y, growth, 3, 1, 1));
    }
    x = n.cat(fmt::format("features.denseblock{}.cat", b + 1), maps);
    if (b < 3) {
      const std::string p = fmt::format("features.transition{}.", b + 1);
      x = n.relu(p + "relu", n.bn(p + "norm", x));
      x = n.avgpool(p + "pool", n.conv(p + "conv", x, x.c / 2, 1), 2, 2);
    }
  }
  x = n.relu("relu", n.bn("features.norm5", x));
  x = n.global_avgpool("avgpool", x);
  n.softmax_xent("loss", n.linear("classifier", x, cfg.get_int("classes")));
  return m;
}

const bool registered =
    (register_family_schema(image_classifier_schema(
         "densenet121", "DenseNet-121 (torchvision), 8.0M parameters", 224, 32, "momentum")),
     register_cost("densenet121", densenet121_cost), true);

}  // namespace
}  // namespace tb
