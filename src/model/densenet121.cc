// DenseNet-121 (Huang et al. 2017; torchvision's densenet121): growth 32, blocks
// (6, 12, 24, 16), bottleneck width 4 x growth, 64 initial features, compression 0.5, no
// dropout. Each layer concatenates every earlier feature map of its block afresh, as
// torchvision does without memory_efficient, so the copies are part of the workload.
// Module names are torchvision's (features.denseblock1.denselayer1.norm1, ...).
#include <fmt/format.h>

#include "model/image_classifier.h"

namespace tb {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}
nn::Conv2d conv1x1(int64_t in, int64_t out) { return conv(in, out, 1, 1, 0); }

struct DenseLayerImpl : nn::Module {
  DenseLayerImpl(int64_t in, int64_t growth, int64_t bn_size)
      : norm1(register_module("norm1", nn::BatchNorm2d(in))),
        conv1(register_module("conv1", conv(in, bn_size * growth, 1, 1, 0))),
        norm2(register_module("norm2", nn::BatchNorm2d(bn_size * growth))),
        conv2(register_module("conv2", conv(bn_size * growth, growth, 3, 1, 1))) {}
  torch::Tensor forward(const std::vector<torch::Tensor>& previous) {
    auto y = layer_op(conv1, relu_op(norm1->forward(torch::cat(previous, 1)), /*inplace=*/true));
    return layer_op(conv2, relu_op(norm2->forward(y), true));
  }
  nn::BatchNorm2d norm1;
  nn::Conv2d conv1;
  nn::BatchNorm2d norm2;
  nn::Conv2d conv2;
};
TORCH_MODULE(DenseLayer);

struct DenseBlockImpl : nn::Module {
  DenseBlockImpl(int64_t layers, int64_t in, int64_t growth, int64_t bn_size) {
    for (int64_t i = 0; i < layers; ++i)
      this->layers.push_back(register_module(fmt::format("denselayer{}", i + 1),
                                             DenseLayer(in + i * growth, growth, bn_size)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> features{x};
    for (auto& l : layers) features.push_back(l->forward(features));
    return torch::cat(features, 1);
  }
  std::vector<DenseLayer> layers;
};
TORCH_MODULE(DenseBlock);

// torchvision's _Transition (an nn.Sequential there; LibTorch cannot nest Sequentials).
struct TransitionImpl : nn::Module {
  TransitionImpl(int64_t in, int64_t out)
      : norm(register_module("norm", nn::BatchNorm2d(in))),
        conv(register_module("conv", conv1x1(in, out))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::avg_pool2d(layer_op(conv, relu_op(norm->forward(x), /*inplace=*/true)), 2, 2);
  }
  nn::BatchNorm2d norm;
  nn::Conv2d conv;
};
TORCH_MODULE(Transition);

struct DenseNetImpl : nn::Module {
  DenseNetImpl(int64_t classes, int64_t growth, std::vector<int64_t> blocks, int64_t init_features,
               int64_t bn_size) {
    features->push_back("conv0", conv(3, init_features, 7, 2, 3));
    features->push_back("norm0", nn::BatchNorm2d(init_features));
    features->push_back("relu0", nn::ReLU(nn::ReLUOptions(true)));
    features->push_back("pool0", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t n = init_features;
    for (size_t i = 0; i < blocks.size(); ++i) {
      features->push_back(fmt::format("denseblock{}", i + 1),
                          DenseBlock(blocks[i], n, growth, bn_size));
      n += blocks[i] * growth;
      if (i + 1 < blocks.size()) {
        features->push_back(fmt::format("transition{}", i + 1), Transition(n, n / 2));
        n /= 2;
      }
    }
    features->push_back("norm5", nn::BatchNorm2d(n));
    register_module("features", features);
    classifier = register_module("classifier", nn::Linear(n, classes));

    // torchvision's initialisation: Kaiming normal (fan_in) convolutions, unit BN scale,
    // classifier bias zero (its weight keeps Linear's default).
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight);
      } else if (auto* b = m->as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      }
    }
    nn::init::zeros_(classifier->bias);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = relu_op(forward_with_points(features, x), /*inplace=*/true);
    return layer_op(classifier, torch::flatten(torch::adaptive_avg_pool2d(y, {1, 1}), 1));
  }
  nn::Sequential features;
  nn::Linear classifier{nullptr};
};
TORCH_MODULE(DenseNet);

class DenseNet121Workload : public ImageClassifierWorkload {
 public:
  explicit DenseNet121Workload(const Config& c)
      : ImageClassifierWorkload(c),
        net_(c.get_int("classes"), 32, std::vector<int64_t>{6, 12, 24, 16}, 64, 4) {}
  torch::nn::Module& module() override { return *net_; }

 protected:
  torch::Tensor forward(const torch::Tensor& images) override { return net_->forward(images); }

 private:
  DenseNet net_;
};

const bool densenet121_registered =
    (register_builder("densenet121",
                      [](const Config& c) { return std::make_unique<DenseNet121Workload>(c); }),
     true);

}  // namespace
}  // namespace tb
