#pragma once
// What the image-classification reference models (resnet50, inception3, densenet121,
// mobilenet_v2, squeezenet1_1) share: TBD's synthetic ImageNet-shaped data (random
// images, random labels), the throughput unit, the parameters `image` and `classes`.
#include <string>
#include <vector>

#include "model/activation_point.h"
#include "model/workload.h"

namespace tb {

// Random N(0, 1) images of image x image RGB pixels and uniform labels: the work per step
// does not depend on the pixel values, so no data set is needed.
class ImageClassifierWorkload : public Workload {
 public:
  explicit ImageClassifierWorkload(const Config& c)
      : batch_(c.get_int("batch")), image_(c.get_int("image")), classes_(c.get_int("classes")) {}
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    auto opts = torch::TensorOptions().device(device);
    auto x = torch::randn({batch_, 3, image_, image_}, opts).to(dtype);
    auto y = torch::randint(0, classes_, {batch_}, opts.dtype(torch::kLong));
    return {{x}, y};
  }
  int64_t examples_per_step() const override { return batch_; }
  torch::Tensor logits(const Batch& b) override { return activation_point(forward(b.inputs[0])); }
  torch::Tensor loss(const Batch& b) override {
    return torch::nn::functional::cross_entropy(logits(b), b.target);
  }
  // Every model's Linear, Conv2d and activation runs through model/activation_point.h.
  bool has_activation_points() const override { return true; }

 protected:
  // The network's logits for a batch of images.
  virtual torch::Tensor forward(const torch::Tensor& images) = 0;

  int64_t batch_, image_, classes_;
};

}  // namespace tb
