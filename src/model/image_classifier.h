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

// `min_image`: the smallest side the network's downsampling leaves at least one pixel for.
inline FamilySchema image_classifier_schema(const std::string& name, const std::string& summary,
                                            int64_t default_image, int64_t min_image,
                                            const std::string& optimizer) {
  const std::string image = std::to_string(default_image);
  FamilySchema s{
      name,
      summary,
      {{"image", "side of the square RGB input image", image, min_image, 1 << 14, {}},
       {"classes", "classes (ImageNet: 1000)", "1000", 1, 1 << 20, {}}},
      name + ":image=" + image + ",classes=1000,batch=32,dtype=fp32,optimizer=" + optimizer,
      "image classification",
      "images",
      {4, 8, 16, 32, 64}};
  for (auto& p : common_params(32, optimizer)) s.params.push_back(p);
  return s;
}

}  // namespace tb
