// SqueezeNet 1.1 (Iandola et al. 2016; torchvision's squeezenet1_1): Fire modules of a 1x1
// squeeze and concatenated 1x1/3x3 expands, no BatchNorm, and a 1x1 convolution as the
// classifier. Module names are torchvision's (features.N, classifier.1).
#include "model/image_classifier.h"

namespace tb {
namespace {

namespace nn = torch::nn;

struct FireImpl : nn::Module {
  FireImpl(int64_t in, int64_t squeeze_planes, int64_t e1, int64_t e3)
      : squeeze(register_module("squeeze", nn::Conv2d(nn::Conv2dOptions(in, squeeze_planes, 1)))),
        expand1x1(
            register_module("expand1x1", nn::Conv2d(nn::Conv2dOptions(squeeze_planes, e1, 1)))),
        expand3x3(register_module(
            "expand3x3", nn::Conv2d(nn::Conv2dOptions(squeeze_planes, e3, 3).padding(1)))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto s = relu_op(layer_op(squeeze, x), /*inplace=*/true);
    return torch::cat(
        {relu_op(layer_op(expand1x1, s), true), relu_op(layer_op(expand3x3, s), true)}, 1);
  }
  nn::Conv2d squeeze, expand1x1, expand3x3;
};
TORCH_MODULE(Fire);

nn::MaxPool2d pool() { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).ceil_mode(true)); }

struct SqueezeNetImpl : nn::Module {
  explicit SqueezeNetImpl(int64_t classes) {
    features->push_back(nn::Conv2d(nn::Conv2dOptions(3, 64, 3).stride(2)));
    features->push_back(nn::ReLU(nn::ReLUOptions(true)));
    features->push_back(pool());
    features->push_back(Fire(64, 16, 64, 64));
    features->push_back(Fire(128, 16, 64, 64));
    features->push_back(pool());
    features->push_back(Fire(128, 32, 128, 128));
    features->push_back(Fire(256, 32, 128, 128));
    features->push_back(pool());
    features->push_back(Fire(256, 48, 192, 192));
    features->push_back(Fire(384, 48, 192, 192));
    features->push_back(Fire(384, 64, 256, 256));
    features->push_back(Fire(512, 64, 256, 256));
    register_module("features", features);
    auto final_conv = nn::Conv2d(nn::Conv2dOptions(512, classes, 1));
    classifier->push_back(nn::Dropout(0.5));
    classifier->push_back(final_conv);
    classifier->push_back(nn::ReLU(nn::ReLUOptions(true)));
    classifier->push_back(nn::AdaptiveAvgPool2d(1));
    register_module("classifier", classifier);

    // torchvision's initialisation: the classifier N(0, 0.01), every other convolution
    // Kaiming uniform, biases zero.
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<nn::Conv2d>()) {
        if (c == final_conv.get())
          nn::init::normal_(c->weight, 0.0, 0.01);
        else
          nn::init::kaiming_uniform_(c->weight);
        nn::init::zeros_(c->bias);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::flatten(forward_with_points(classifier, forward_with_points(features, x)), 1);
  }
  nn::Sequential features, classifier;
};
TORCH_MODULE(SqueezeNet);

class SqueezeNetWorkload : public ImageClassifierWorkload {
 public:
  explicit SqueezeNetWorkload(const Config& c)
      : ImageClassifierWorkload(c), net_(c.get_int("classes")) {}
  torch::nn::Module& module() override { return *net_; }

 protected:
  torch::Tensor forward(const torch::Tensor& images) override { return net_->forward(images); }

 private:
  SqueezeNet net_;
};

const bool squeezenet1_1_registered =
    (register_builder("squeezenet1_1",
                      [](const Config& c) { return std::make_unique<SqueezeNetWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
