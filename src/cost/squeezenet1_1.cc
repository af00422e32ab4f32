// Schema and cost description of squeezenet1_1 (model/squeezenet1_1.cc); layer names are the module
// names. Its convolutions carry biases and are followed by ReLU, not BN.
#include <fmt/format.h>

#include "cost/family_schemas.h"
#include "cost/image_net.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost squeezenet_cost(const Config& cfg, int64_t eb) {
  ModelCost m;
  cost::ImageNet n(m, cfg.get_int("batch"), eb);
  auto conv_relu = [&](const std::string& name, const cost::FeatureMap& x, int64_t cout, int64_t k,
                       int64_t stride, int64_t pad) {
    return n.relu(name + ".relu", n.conv(name, x, cout, k, stride, pad, 1, true));
  };
  auto x = n.images(cfg.get_int("image"));
  x = conv_relu("features.0", x, 64, 3, 2, 0);
  struct Fire {
    int index;
    int64_t squeeze, e1, e3;
  };
  const Fire fires[] = {{3, 16, 64, 64},    {4, 16, 64, 64},   {6, 32, 128, 128},
                        {7, 32, 128, 128},  {9, 48, 192, 192}, {10, 48, 192, 192},
                        {11, 64, 256, 256}, {12, 64, 256, 256}};
  for (const auto& f : fires) {
    if (f.index == 3 || f.index == 6 || f.index == 9)
      x = n.maxpool(fmt::format("features.{}", f.index - 1), x, 3, 2, 0, /*ceil_mode=*/true);
    const std::string p = fmt::format("features.{}.", f.index);
    auto s = conv_relu(p + "squeeze", x, f.squeeze, 1, 1, 0);
    x = n.cat(p + "cat", {conv_relu(p + "expand1x1", s, f.e1, 1, 1, 0),
                          conv_relu(p + "expand3x3", s, f.e3, 3, 1, 1)});
  }
  x = n.dropout("classifier.0", x);
  x = conv_relu("classifier.1", x, cfg.get_int("classes"), 1, 1, 0);
  x = n.global_avgpool("classifier.3", x);
  n.softmax_xent("loss", x);
  return m;
}

const bool registered =
    (register_family_schema(image_classifier_schema(
         "squeezenet1_1", "SqueezeNet 1.1 (torchvision), 1.2M parameters", 224, 32, "momentum")),
     register_cost("squeezenet1_1", squeezenet_cost), true);

}  // namespace
}  // namespace tb
