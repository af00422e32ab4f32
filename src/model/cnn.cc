// ParaDnn convolutional family: a ResNet of residual or bottleneck blocks.
// stem conv 7x7/2 -> BN+ReLU -> maxpool 3/2 -> 4 groups of `blocks` blocks with
// filters x{1,2,4,8} and strides {1,2,2,2} -> global average pool -> Linear(output).
// Global (adaptive) pooling lets any image size work; the original code's fixed 7x7
// pool broke on images smaller than 224.
#include "model/activation_point.h"
#include "model/workload.h"

namespace tb {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

struct BlockImpl : nn::Module {
  BlockImpl(bool bottleneck, int64_t in, int64_t width, int64_t stride, bool project) {
    const int64_t out = bottleneck ? 4 * width : width;
    if (bottleneck) {
      body = nn::Sequential(conv(in, width, 1, 1), nn::BatchNorm2d(width), nn::ReLU(),
                            conv(width, width, 3, stride), nn::BatchNorm2d(width), nn::ReLU(),
                            conv(width, out, 1, 1), nn::BatchNorm2d(out));
    } else {
      body = nn::Sequential(conv(in, width, 3, stride), nn::BatchNorm2d(width), nn::ReLU(),
                            conv(width, width, 3, 1), nn::BatchNorm2d(width));
    }
    register_module("body", body);
    if (project) {
      shortcut = nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out));
      register_module("shortcut", shortcut);
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto skip = shortcut ? forward_with_points(shortcut, x) : x;
    return relu_op(forward_with_points(body, x) + skip);
  }
  nn::Sequential body{nullptr}, shortcut{nullptr};
};
TORCH_MODULE(Block);

struct CnnNetImpl : nn::Module {
  CnnNetImpl(bool bottleneck, int64_t blocks, int64_t filters, int64_t output) {
    features->push_back(conv(3, filters, 7, 2));
    features->push_back(nn::BatchNorm2d(filters));
    features->push_back(nn::ReLU());
    features->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t in = filters;
    for (int64_t g = 0; g < 4; ++g) {
      const int64_t width = filters << g;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t stride = (g > 0 && b == 0) ? 2 : 1;
        features->push_back(Block(bottleneck, in, width, stride, b == 0));
        in = bottleneck ? 4 * width : width;
      }
    }
    features->push_back(nn::AdaptiveAvgPool2d(1));
    features->push_back(nn::Flatten());
    features->push_back(nn::Linear(in, output));
    register_module("features", features);
  }
  torch::Tensor forward(const torch::Tensor& x) { return forward_with_points(features, x); }
  nn::Sequential features;
};
TORCH_MODULE(CnnNet);

class CnnWorkload : public Workload {
 public:
  explicit CnnWorkload(const Config& c)
      : net_(c.get("block") == "bottleneck", c.get_int("blocks"), c.get_int("filters"),
             c.get_int("output")),
        batch_(c.get_int("batch")),
        image_(c.get_int("image")),
        output_(c.get_int("output")) {}
  torch::nn::Module& module() override { return *net_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    auto opts = torch::TensorOptions().device(device);
    auto x = torch::randn({batch_, 3, image_, image_}, opts).to(dtype);
    auto y = torch::randint(0, output_, {batch_}, opts.dtype(torch::kLong));
    return {{x}, y};
  }
  torch::Tensor logits(const Batch& b) override {
    return activation_point(net_->forward(b.inputs[0]));
  }
  torch::Tensor loss(const Batch& b) override {
    return torch::nn::functional::cross_entropy(logits(b), b.target);
  }
  int64_t examples_per_step() const override { return batch_; }
  bool has_activation_points() const override { return true; }

 private:
  CnnNet net_;
  int64_t batch_, image_, output_;
};

const bool cnn_registered =
    (register_builder("cnn", [](const Config& c) { return std::make_unique<CnnWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
