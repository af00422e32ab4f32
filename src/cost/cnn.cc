// Schema and cost description of the cnn family (model/cnn.cc).
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

struct Tracker {
  ModelCost& m;
  int64_t eb, batch;
  int64_t h, w, c;
  // Its output is saved for backward (by the BN or convolution that consumes it).
  void keep() { m.layers.back().saved_bytes += m.layers.back().output_bytes; }
  void conv(const std::string& name, int64_t cout, int64_t k, int64_t stride, bool input_grad) {
    cost::Conv2dShape s{batch, c, h, w, cout, k, stride};
    m.layers.push_back(cost::conv2d(name, s, eb, input_grad));
    keep();
    h = s.out_h(), w = s.out_w(), c = cout;
  }
  void bn(const std::string& name) {
    m.layers.push_back(cost::batchnorm(name, batch, c, h * w, eb));
  }
  void relu(const std::string& name) {
    m.layers.push_back(cost::relu(name, double(batch) * c * h * w, eb));
    keep();
  }
};

ModelCost cnn_cost(const Config& cfg, int64_t eb) {
  const bool bottleneck = cfg.get("block") == "bottleneck";
  const int64_t B = cfg.get_int("batch"), blocks = cfg.get_int("blocks"),
                filters = cfg.get_int("filters"), image = cfg.get_int("image"),
                output = cfg.get_int("output");
  ModelCost m;
  Tracker t{m, eb, B, image, image, 3};
  t.conv("features.0", filters, 7, 2, false);
  t.bn("features.1");
  t.relu("features.2");
  {
    const int64_t oh = (t.h + 2 - 3) / 2 + 1, ow = (t.w + 2 - 3) / 2 + 1;
    m.layers.push_back(cost::maxpool("features.3", B, t.c, t.h * t.w, oh * ow, 3, eb));
    t.keep();
    t.h = oh, t.w = ow;
  }
  int64_t index = 4;
  for (int64_t g = 0; g < 4; ++g) {
    const int64_t width = filters << g;
    for (int64_t b = 0; b < blocks; ++b, ++index) {
      const int64_t stride = (g > 0 && b == 0) ? 2 : 1;
      const std::string p = fmt::format("features.{}", index);
      const int64_t in_h = t.h, in_w = t.w, in_c = t.c;
      if (bottleneck) {
        t.conv(p + ".body.0", width, 1, 1, true);
        t.bn(p + ".body.1");
        t.relu(p + ".body.2");
        t.conv(p + ".body.3", width, 3, stride, true);
        t.bn(p + ".body.4");
        t.relu(p + ".body.5");
        t.conv(p + ".body.6", 4 * width, 1, 1, true);
        t.bn(p + ".body.7");
      } else {
        t.conv(p + ".body.0", width, 3, stride, true);
        t.bn(p + ".body.1");
        t.relu(p + ".body.2");
        t.conv(p + ".body.3", width, 3, 1, true);
        t.bn(p + ".body.4");
      }
      const int64_t out_h = t.h, out_w = t.w, out_c = t.c;
      if (b == 0) {  // projection shortcut from the block's input
        t.h = in_h, t.w = in_w, t.c = in_c;
        t.conv(p + ".shortcut.0", out_c, 1, stride, true);
        t.bn(p + ".shortcut.1");
      }
      t.h = out_h, t.w = out_w, t.c = out_c;
      m.layers.push_back(cost::add(p + ".add", double(B) * t.c * t.h * t.w, eb));
      t.relu(p + ".relu");
    }
  }
  m.layers.push_back(
      cost::global_avgpool(fmt::format("features.{}", index), B, t.c, t.h * t.w, eb));
  t.keep();
  m.layers.push_back(cost::linear(fmt::format("features.{}", index + 2), B, t.c, output, eb, true));
  m.layers.push_back(cost::softmax_xent("loss", B, output, eb));
  m.input_bytes = double(B) * 3 * image * image * eb + 8.0 * B;
  return m;
}

FamilySchema cnn_schema() {
  FamilySchema s{
      "cnn",
      "ParaDnn ResNet-style CNN of residual or bottleneck blocks (4 groups, filters x1,2,4,8)",
      {{"block",
        "residual (2 convs) or bottleneck (1x1, 3x3, 1x1, 4x expansion)",
        "bottleneck",
        0,
        0,
        {"residual", "bottleneck"}},
       {"blocks", "blocks per group", "1", 1, 1024, {}},
       {"filters", "filters of the first group", "16", 1, 1 << 16, {}},
       {"image", "side of the square RGB input image", "224", 8, 1 << 15, {}},
       {"output", "classes", "1000", 1, 1 << 24, {}}},
      "cnn:block=bottleneck,blocks=1,filters=16,image=224,output=1000,batch=32,dtype=fp32"};
  for (auto& p : common_params(32)) s.params.push_back(p);
  s.contract = "cnn:block=residual,blocks=1,filters=8,image=32,output=10,batch=2";
  return s;
}

const bool registered =
    (register_family_schema(cnn_schema()), register_cost("cnn", cnn_cost), true);

}  // namespace
}  // namespace tb
