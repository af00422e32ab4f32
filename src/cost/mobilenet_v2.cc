// Schema and cost description of mobilenet_v2 (model/mobilenet_v2.cc); layer names are the module
// names.
#include <fmt/format.h>

#include "cost/family_schemas.h"
#include "cost/image_net.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost mobilenet_v2_cost(const Config& cfg, int64_t eb) {
  ModelCost m;
  cost::ImageNet n(m, cfg.get_int("batch"), eb);
  // torchvision's Conv2dNormActivation: children 0 (conv), 1 (BN), 2 (ReLU6).
  auto cbr = [&](const std::string& p, const cost::FeatureMap& x, int64_t cout, int64_t k,
                 int64_t stride, int64_t groups) {
    auto y = n.conv(p + "0", x, cout, k, stride, (k - 1) / 2, groups);
    return n.relu6(p + "2", n.bn(p + "1", y));
  };
  auto x = n.images(cfg.get_int("image"));
  x = cbr("features.0.", x, 32, 3, 2, 1);
  struct Setting {
    int64_t t, c, reps, s;
  };
  const Setting settings[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                              {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int index = 1;
  for (const auto& s : settings)
    for (int64_t i = 0; i < s.reps; ++i, ++index) {
      const std::string p = fmt::format("features.{}.conv.", index);
      const int64_t stride = i == 0 ? s.s : 1, hidden = x.c * s.t;
      int child = 0;
      auto y = x;
      if (s.t != 1) y = cbr(p + std::to_string(child++) + ".", y, hidden, 1, 1, 1);
      y = cbr(p + std::to_string(child++) + ".", y, hidden, 3, stride, hidden);
      y = n.conv(p + std::to_string(child), y, s.c, 1);
      y = n.bn(p + std::to_string(child + 1), y);
      x = (stride == 1 && x.c == s.c) ? n.add(fmt::format("features.{}.add", index), y) : y;
    }
  x = cbr(fmt::format("features.{}.", index), x, 1280, 1, 1, 1);
  x = n.global_avgpool("avgpool", x);
  x = n.dropout("classifier.0", x);
  n.softmax_xent("loss", n.linear("classifier.1", x, cfg.get_int("classes")));
  return m;
}

const bool registered = (register_family_schema(image_classifier_schema(
                             "mobilenet_v2", "MobileNetV2 width 1.0 (torchvision), 3.5M parameters",
                             224, 32, "rmsprop")),
                         register_cost("mobilenet_v2", mobilenet_v2_cost), true);

}  // namespace
}  // namespace tb
