// MobileNetV2 (Sandler et al. 2018; torchvision's mobilenet_v2, width 1.0): inverted
// residual blocks of a 1x1 expansion, a 3x3 depthwise convolution and a linear 1x1
// projection, ReLU6, dropout 0.2 before the classifier. Trained with RMSprop (decay 0.9,
// momentum 0.9) as in the paper. Module names are torchvision's.
#include "model/image_classifier.h"

namespace tb {
namespace {

namespace nn = torch::nn;

// torchvision's Conv2dNormActivation with ReLU6: conv (no bias), BN, ReLU6 as children 0,
// 1, 2. A module of its own, since LibTorch cannot nest one Sequential in another.
struct ConvBNReLU6Impl : nn::Module {
  ConvBNReLU6Impl(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups)
      : conv(register_module("0", nn::Conv2d(nn::Conv2dOptions(in, out, k)
                                                 .stride(stride)
                                                 .padding((k - 1) / 2)
                                                 .groups(groups)
                                                 .bias(false)))),
        bn(register_module("1", nn::BatchNorm2d(out))),
        act(register_module("2", nn::ReLU6(nn::ReLU6Options(true)))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return layer_op(act, bn->forward(layer_op(conv, x)));
  }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
  nn::ReLU6 act;
};
TORCH_MODULE(ConvBNReLU6);

struct InvertedResidualImpl : nn::Module {
  InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand)
      : residual(stride == 1 && in == out) {
    const int64_t hidden = in * expand;
    if (expand != 1) conv->push_back(ConvBNReLU6(in, hidden, 1, 1, 1));
    conv->push_back(ConvBNReLU6(hidden, hidden, 3, stride, hidden));
    conv->push_back(nn::Conv2d(nn::Conv2dOptions(hidden, out, 1).bias(false)));
    conv->push_back(nn::BatchNorm2d(out));
    register_module("conv", conv);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return residual ? x + forward_with_points(conv, x) : forward_with_points(conv, x);
  }
  bool residual;
  nn::Sequential conv;
};
TORCH_MODULE(InvertedResidual);

// The paper's Table 2: expansion t, output channels c, repeats n, first stride s. At width
// 1.0 every channel count is already a multiple of 8, so torchvision's rounding is a no-op.
struct Setting {
  int64_t t, c, n, s;
};
constexpr Setting kSettings[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};

struct MobileNetV2Impl : nn::Module {
  explicit MobileNetV2Impl(int64_t classes) {
    int64_t in = 32;
    features->push_back(ConvBNReLU6(3, in, 3, 2, 1));
    for (const auto& s : kSettings)
      for (int64_t i = 0; i < s.n; ++i) {
        features->push_back(InvertedResidual(in, s.c, i == 0 ? s.s : 1, s.t));
        in = s.c;
      }
    features->push_back(ConvBNReLU6(in, 1280, 1, 1, 1));
    register_module("features", features);
    classifier->push_back(nn::Dropout(0.2));
    classifier->push_back(nn::Linear(1280, classes));
    register_module("classifier", classifier);

    // torchvision's initialisation: Kaiming normal (fan_out) convolutions, unit BN scale,
    // classifier N(0, 0.01), biases zero.
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut);
      } else if (auto* b = m->as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      } else if (auto* l = m->as<nn::Linear>()) {
        nn::init::normal_(l->weight, 0.0, 0.01);
        nn::init::zeros_(l->bias);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y =
        torch::flatten(torch::adaptive_avg_pool2d(forward_with_points(features, x), {1, 1}), 1);
    return forward_with_points(classifier, y);
  }
  nn::Sequential features, classifier;
};
TORCH_MODULE(MobileNetV2);

class MobileNetV2Workload : public ImageClassifierWorkload {
 public:
  explicit MobileNetV2Workload(const Config& c)
      : ImageClassifierWorkload(c), net_(c.get_int("classes")) {}
  torch::nn::Module& module() override { return *net_; }

 protected:
  torch::Tensor forward(const torch::Tensor& images) override { return net_->forward(images); }

 private:
  MobileNetV2 net_;
};

const bool mobilenet_v2_registered =
    (register_builder("mobilenet_v2",
                      [](const Config& c) { return std::make_unique<MobileNetV2Workload>(c); }),
     true);

}  // namespace
}  // namespace tb
