// Schema and cost description of inception3 (model/inception3.cc) in training mode: the auxiliary
// head and its loss are included. Layer names are the module names; each BasicConv2d is
// its conv, bn and ReLU.
#include <fmt/format.h>

#include "cost/family_schemas.h"
#include "cost/image_net.h"
#include "spec/family.h"

namespace tb {
namespace {

using cost::FeatureMap;

struct Inception {
  cost::ImageNet& n;
  FeatureMap rect(const std::string& name, const FeatureMap& x, int64_t cout, int64_t kh,
                  int64_t kw, int64_t ph, int64_t pw) {
    auto y = n.conv_rect(name + ".conv", x, cout, kh, kw, 1, ph, pw);
    return n.relu(name + ".relu", n.bn(name + ".bn", y));
  }
  FeatureMap conv(const std::string& name, const FeatureMap& x, int64_t cout, int64_t k,
                  int64_t stride = 1, int64_t pad = 0) {
    auto y = n.conv(name + ".conv", x, cout, k, stride, pad);
    return n.relu(name + ".relu", n.bn(name + ".bn", y));
  }
  FeatureMap row(const std::string& name, const FeatureMap& x, int64_t cout, int64_t k) {
    return rect(name, x, cout, 1, k, 0, k / 2);
  }
  FeatureMap col(const std::string& name, const FeatureMap& x, int64_t cout, int64_t k) {
    return rect(name, x, cout, k, 1, k / 2, 0);
  }
  FeatureMap pool_branch(const std::string& p, const FeatureMap& x, int64_t cout) {
    return conv(p + "branch_pool", n.avgpool(p + "avg_pool", x, 3, 1, 1), cout, 1);
  }

  FeatureMap a(const std::string& p, const FeatureMap& x, int64_t pool_features) {
    auto b1 = conv(p + "branch1x1", x, 64, 1);
    auto b5 = conv(p + "branch5x5_2", conv(p + "branch5x5_1", x, 48, 1), 64, 5, 1, 2);
    auto d3 = conv(p + "branch3x3dbl_1", x, 64, 1);
    d3 = conv(p + "branch3x3dbl_3", conv(p + "branch3x3dbl_2", d3, 96, 3, 1, 1), 96, 3, 1, 1);
    return n.cat(p + "cat", {b1, b5, d3, pool_branch(p, x, pool_features)});
  }
  FeatureMap b(const std::string& p, const FeatureMap& x) {
    auto b3 = conv(p + "branch3x3", x, 384, 3, 2);
    auto d3 = conv(p + "branch3x3dbl_1", x, 64, 1);
    d3 = conv(p + "branch3x3dbl_3", conv(p + "branch3x3dbl_2", d3, 96, 3, 1, 1), 96, 3, 2);
    return n.cat(p + "cat", {b3, d3, n.maxpool(p + "max_pool", x, 3, 2)});
  }
  FeatureMap c(const std::string& p, const FeatureMap& x, int64_t c7) {
    auto b1 = conv(p + "branch1x1", x, 192, 1);
    auto b7 = conv(p + "branch7x7_1", x, c7, 1);
    b7 = col(p + "branch7x7_3", row(p + "branch7x7_2", b7, c7, 7), 192, 7);
    auto d7 = conv(p + "branch7x7dbl_1", x, c7, 1);
    d7 = row(p + "branch7x7dbl_3", col(p + "branch7x7dbl_2", d7, c7, 7), c7, 7);
    d7 = row(p + "branch7x7dbl_5", col(p + "branch7x7dbl_4", d7, c7, 7), 192, 7);
    return n.cat(p + "cat", {b1, b7, d7, pool_branch(p, x, 192)});
  }
  FeatureMap d(const std::string& p, const FeatureMap& x) {
    auto b3 = conv(p + "branch3x3_2", conv(p + "branch3x3_1", x, 192, 1), 320, 3, 2);
    auto b7 = row(p + "branch7x7x3_2", conv(p + "branch7x7x3_1", x, 192, 1), 192, 7);
    b7 = conv(p + "branch7x7x3_4", col(p + "branch7x7x3_3", b7, 192, 7), 192, 3, 2);
    return n.cat(p + "cat", {b3, b7, n.maxpool(p + "max_pool", x, 3, 2)});
  }
  FeatureMap e(const std::string& p, const FeatureMap& x) {
    auto b1 = conv(p + "branch1x1", x, 320, 1);
    auto b3 = conv(p + "branch3x3_1", x, 384, 1);
    b3 = n.cat(p + "branch3x3_cat",
               {row(p + "branch3x3_2a", b3, 384, 3), col(p + "branch3x3_2b", b3, 384, 3)});
    auto d3 = conv(p + "branch3x3dbl_2", conv(p + "branch3x3dbl_1", x, 448, 1), 384, 3, 1, 1);
    d3 = n.cat(p + "branch3x3dbl_cat",
               {row(p + "branch3x3dbl_3a", d3, 384, 3), col(p + "branch3x3dbl_3b", d3, 384, 3)});
    return n.cat(p + "cat", {b1, b3, d3, pool_branch(p, x, 192)});
  }
};

ModelCost inception3_cost(const Config& cfg, int64_t eb) {
  const int64_t classes = cfg.get_int("classes");
  ModelCost m;
  cost::ImageNet n(m, cfg.get_int("batch"), eb);
  Inception i{n};
  auto x = n.images(cfg.get_int("image"));
  x = i.conv("Conv2d_2a_3x3", i.conv("Conv2d_1a_3x3", x, 32, 3, 2), 32, 3);
  x = n.maxpool("maxpool1", i.conv("Conv2d_2b_3x3", x, 64, 3, 1, 1), 3, 2);
  x = i.conv("Conv2d_4a_3x3", i.conv("Conv2d_3b_1x1", x, 80, 1), 192, 3);
  x = n.maxpool("maxpool2", x, 3, 2);
  x = i.a("Mixed_5b.", x, 32);
  x = i.a("Mixed_5c.", x, 64);
  x = i.a("Mixed_5d.", x, 64);
  x = i.b("Mixed_6a.", x);
  x = i.c("Mixed_6b.", x, 128);
  x = i.c("Mixed_6c.", x, 160);
  x = i.c("Mixed_6d.", x, 160);
  x = i.c("Mixed_6e.", x, 192);
  {
    auto y = n.avgpool("AuxLogits.avg_pool", x, 5, 3);
    y = i.conv("AuxLogits.conv1", i.conv("AuxLogits.conv0", y, 128, 1), 768, 5);
    y = n.global_avgpool("AuxLogits.adaptive_avg_pool", y);
    n.softmax_xent("AuxLogits.loss", n.linear("AuxLogits.fc", y, classes));
  }
  x = i.d("Mixed_7a.", x);
  x = i.e("Mixed_7b.", x);
  x = i.e("Mixed_7c.", x);
  x = n.dropout("dropout", n.global_avgpool("avgpool", x));
  n.softmax_xent("loss", n.linear("fc", x, classes));
  return m;
}

FamilySchema inception3_schema() {
  FamilySchema s = image_classifier_schema(
      "inception3", "Inception-v3 with its auxiliary classifier (torchvision), 27.2M parameters",
      299, 299, "rmsprop");
  // The auxiliary head batch-normalises a 1x1 feature map: one image per batch leaves one
  // value per channel, which training-mode batch norm rejects (as in PyTorch).
  for (auto& p : s.params)
    if (p.name == "batch") p.min = 2;
  return s;
}

const bool registered = (register_family_schema(inception3_schema()),
                         register_cost("inception3", inception3_cost), true);

}  // namespace
}  // namespace tb
