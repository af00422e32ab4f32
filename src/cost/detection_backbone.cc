#include "cost/detection_backbone.h"

#include <fmt/format.h>

#include "base/errors.h"

namespace tb::cost {

DetectionMap DetectionTracker::conv(const std::string& name, const DetectionMap& in, int64_t cout,
                                    int64_t k, int64_t stride, bool trainable, bool bias) {
  const ConvGeometry s{batch, in.c, in.h, in.w, cout, k, k, stride, stride, k / 2, k / 2, 1, bias};
  m.layers.push_back(cost::conv(name, s, eb, in.grad, trainable));
  // A trainable convolution keeps its input for the weight gradient (counted at its
  // producer in cnn's convention; here at the consumer, since inputs are shared).
  if (trainable) m.layers.back().saved_bytes += eb * double(batch) * in.c * in.h * in.w;
  return {cout, s.out_h(), s.out_w(), in.grad || trainable};
}

void DetectionTracker::frozen_bn(const std::string& name, const DetectionMap& x) {
  m.layers.push_back(cost::frozen_batchnorm(name, batch, x.c, x.h * x.w, eb, x.grad));
}

void DetectionTracker::relu(const std::string& name, const DetectionMap& x) {
  m.layers.push_back(cost::relu(name, double(batch) * x.c * x.h * x.w, eb));
  if (x.grad) {
    m.layers.back().saved_bytes += m.layers.back().output_bytes;
  } else {  // no backward through the frozen stages
    m.layers.back().bwd_input_flops = 0;
  }
}

std::vector<DetectionMap> resnet_body(DetectionTracker& t, const std::vector<int64_t>& layers,
                                      int64_t height, int64_t width) {
  const std::string p = "backbone.body.";
  DetectionMap x{3, height, width, false};
  x = t.conv(p + "conv1", x, 64, 7, 2, false, false);
  t.frozen_bn(p + "bn1", x);
  t.relu(p + "relu", x);
  const int64_t oh = (x.h + 2 - 3) / 2 + 1, ow = (x.w + 2 - 3) / 2 + 1;
  t.m.layers.push_back(maxpool(p + "maxpool", t.batch, x.c, x.h * x.w, oh * ow, 3, t.eb));
  x.h = oh, x.w = ow;
  std::vector<DetectionMap> out;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = 64 << s;
    const bool trainable = s >= 1;  // trainable_layers=3: layer2..layer4
    for (int64_t b = 0; b < layers.at(s); ++b) {
      const std::string n = fmt::format("{}layer{}.{}.", p, s + 1, b);
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      const DetectionMap in = x;
      x = t.conv(n + "conv1", in, planes, 1, 1, trainable, false);
      t.frozen_bn(n + "bn1", x);
      t.relu(n + "relu1", x);
      x = t.conv(n + "conv2", x, planes, 3, stride, trainable, false);
      t.frozen_bn(n + "bn2", x);
      t.relu(n + "relu2", x);
      x = t.conv(n + "conv3", x, 4 * planes, 1, 1, trainable, false);
      t.frozen_bn(n + "bn3", x);
      if (b == 0) {
        DetectionMap d = t.conv(n + "downsample.0", in, 4 * planes, 1, stride, trainable, false);
        t.frozen_bn(n + "downsample.1", d);
      }
      t.m.layers.push_back(add(n + "add", double(t.batch) * x.c * x.h * x.w, t.eb));
      t.relu(n + "relu3", x);
    }
    out.push_back(x);
  }
  return out;
}

std::vector<DetectionMap> fpn(DetectionTracker& t, const std::vector<DetectionMap>& c, bool p6p7) {
  const std::string p = "backbone.fpn.";
  const size_t n = c.size();
  std::vector<DetectionMap> out(n);
  DetectionMap last =
      t.conv(fmt::format("{}inner_blocks.{}.0", p, n - 1), c[n - 1], 256, 1, 1, true, true);
  out[n - 1] = t.conv(fmt::format("{}layer_blocks.{}.0", p, n - 1), last, 256, 3, 1, true, true);
  for (size_t i = n - 1; i-- > 0;) {
    DetectionMap lateral =
        t.conv(fmt::format("{}inner_blocks.{}.0", p, i), c[i], 256, 1, 1, true, true);
    const double e = double(t.batch) * 256 * lateral.h * lateral.w;
    t.m.layers.push_back(upsample_nearest(fmt::format("{}upsample.{}", p, i), e, t.eb));
    t.m.layers.push_back(add(fmt::format("{}add.{}", p, i), e, t.eb));
    last = lateral;
    out[i] = t.conv(fmt::format("{}layer_blocks.{}.0", p, i), last, 256, 3, 1, true, true);
  }
  const DetectionMap top = out.back();
  if (!p6p7) {
    const int64_t oh = (top.h - 1) / 2 + 1, ow = (top.w - 1) / 2 + 1;
    t.m.layers.push_back(
        maxpool(p + "extra_blocks.pool", t.batch, 256, top.h * top.w, oh * ow, 1, t.eb));
    out.push_back({256, oh, ow, true});
  } else {
    DetectionMap p6 = t.conv(p + "extra_blocks.p6", top, 256, 3, 2, true, true);
    out.push_back(p6);
    t.relu(p + "extra_blocks.relu", p6);
    out.push_back(t.conv(p + "extra_blocks.p7", p6, 256, 3, 2, true, true));
  }
  return out;
}

void check_detection_size(int64_t height, int64_t width) {
  for (auto [key, v] : {std::pair{"height", height}, std::pair{"width", width}})
    if (v % 32 != 0)
      throw UsageError(
          fmt::format("{}={}: must be a multiple of 32 (the FPN's coarsest stride)", key, v));
}

}  // namespace tb::cost
