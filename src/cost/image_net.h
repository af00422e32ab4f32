#pragma once
// Walks an image-classification network in forward order for its cost description: each
// call appends the layer's cost (cost/layers.h) and returns the feature map it produced.
// It also decides what is kept for backward: a feature map is counted once, at the layer
// that made it, when a consumer needs it (convolutions, BN and linear layers keep their
// input, ReLU its output, ReLU6 its input, max pooling its input and indices); average
// pooling, concatenation and the residual add keep nothing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cost/layers.h"

namespace tb::cost {

struct FeatureMap {
  int layer;  // index in ModelCost::layers of its producer; -1 for the input images
  int64_t c, h, w;
};

class ImageNet {
 public:
  ImageNet(ModelCost& m, int64_t batch, int64_t eb) : m_(m), batch_(batch), eb_(eb) {}

  FeatureMap images(int64_t image) {
    m_.input_bytes = double(batch_) * 3 * image * image * eb_ + 8.0 * batch_;
    return {-1, 3, image, image};
  }
  // Rectangular kernel kh x kw, padding ph x pw.
  FeatureMap conv_rect(const std::string& name, const FeatureMap& x, int64_t cout, int64_t kh,
                       int64_t kw, int64_t stride, int64_t ph, int64_t pw, int64_t groups = 1,
                       bool bias = false) {
    keep(x);
    const ConvGeometry g{batch_, x.c, x.h, x.w, cout, kh, kw, stride, stride, ph, pw, groups, bias};
    return push(cost::conv(name, g, eb_, x.layer >= 0), cout, g.out_h(), g.out_w());
  }
  FeatureMap conv(const std::string& name, const FeatureMap& x, int64_t cout, int64_t k,
                  int64_t stride = 1, int64_t pad = 0, int64_t groups = 1, bool bias = false) {
    return conv_rect(name, x, cout, k, k, stride, pad, pad, groups, bias);
  }
  FeatureMap bn(const std::string& name, const FeatureMap& x) {
    keep(x);
    return push(batchnorm(name, batch_, x.c, x.h * x.w, eb_), x.c, x.h, x.w);
  }
  FeatureMap relu(const std::string& name, const FeatureMap& x) {
    auto y = push(cost::relu(name, elements(x), eb_), x.c, x.h, x.w);
    keep(y);
    return y;
  }
  FeatureMap relu6(const std::string& name, const FeatureMap& x) {
    // min(max(x, 0), 6): a comparison with each bound, forward and backward. It keeps its
    // input: hardtanh's backward reads it, and LibTorch keeps it apart from the output even
    // in place (measured with `trainbench memory mobilenet_v2`).
    return push(cost::elementwise(name, "relu6", elements(x), 2, 2, 1, eb_), x.c, x.h, x.w);
  }
  FeatureMap maxpool(const std::string& name, const FeatureMap& x, int64_t k, int64_t stride,
                     int64_t pad = 0, bool ceil_mode = false) {
    keep(x);
    const int64_t oh = pooled(x.h, k, stride, pad, ceil_mode),
                  ow = pooled(x.w, k, stride, pad, ceil_mode);
    return push(cost::maxpool(name, batch_, x.c, x.h * x.w, oh * ow, k, eb_), x.c, oh, ow);
  }
  FeatureMap avgpool(const std::string& name, const FeatureMap& x, int64_t k, int64_t stride,
                     int64_t pad = 0) {
    const int64_t oh = pooled(x.h, k, stride, pad, false), ow = pooled(x.w, k, stride, pad, false);
    return push(vision::avgpool(name, batch_, x.c, x.h * x.w, oh * ow, k, eb_), x.c, oh, ow);
  }
  FeatureMap global_avgpool(const std::string& name, const FeatureMap& x) {
    return push(cost::global_avgpool(name, batch_, x.c, x.h * x.w, eb_), x.c, 1, 1);
  }
  FeatureMap cat(const std::string& name, const std::vector<FeatureMap>& parts) {
    int64_t c = 0;
    for (const auto& p : parts) c += p.c;
    const FeatureMap& p = parts.front();
    return push(vision::concat(name, double(batch_) * c * p.h * p.w, eb_), c, p.h, p.w);
  }
  FeatureMap add(const std::string& name, const FeatureMap& a) {
    return push(cost::add(name, elements(a), eb_), a.c, a.h, a.w);
  }
  FeatureMap dropout(const std::string& name, const FeatureMap& x) {
    return push(vision::dropout(name, elements(x), eb_), x.c, x.h, x.w);
  }
  // On the flattened feature map.
  FeatureMap linear(const std::string& name, const FeatureMap& x, int64_t out) {
    keep(x);
    return push(cost::linear(name, batch_, x.c * x.h * x.w, out, eb_, true), out, 1, 1);
  }
  void softmax_xent(const std::string& name, const FeatureMap& logits) {
    push(cost::softmax_xent(name, batch_, logits.c, eb_), logits.c, 1, 1);
  }

 private:
  double elements(const FeatureMap& x) const { return double(batch_) * x.c * x.h * x.w; }
  static int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
    if (!ceil_mode) return (in + 2 * p - k) / s + 1;
    int64_t out = (in + 2 * p - k + s - 1) / s + 1;
    if ((out - 1) * s >= in + p) --out;  // the last window must start inside the input
    return out;
  }
  FeatureMap push(LayerCost l, int64_t c, int64_t h, int64_t w) {
    m_.layers.push_back(std::move(l));
    kept_.push_back(false);
    return {int(m_.layers.size()) - 1, c, h, w};
  }
  void keep(const FeatureMap& x) {
    if (x.layer < 0 || kept_[x.layer]) return;
    kept_[x.layer] = true;
    m_.layers[x.layer].saved_bytes += m_.layers[x.layer].output_bytes;
  }
  ModelCost& m_;
  int64_t batch_, eb_;
  std::vector<bool> kept_;
};

}  // namespace tb::cost
