// ResNet-50 (He et al. 2016; torchvision's v1.5 with the stride on the 3x3 convolution),
// the image-classification model of TBD and of MLPerf, trained with momentum SGD as
// torchvision's reference recipe does.
#include "model/image_classifier.h"
#include "model/resnet.h"

namespace tb {
namespace {

class ResNet50Workload : public ImageClassifierWorkload {
 public:
  explicit ResNet50Workload(const Config& c)
      : ImageClassifierWorkload(c), net_(make_options(c.get_int("classes"))) {}
  torch::nn::Module& module() override { return *net_; }

 protected:
  torch::Tensor forward(const torch::Tensor& images) override { return net_->forward(images); }

 private:
  static ResNetOptions make_options(int64_t classes) {
    ResNetOptions o;
    o.layers = {3, 4, 6, 3};
    o.num_classes = classes;
    return o;
  }
  ResNet net_;
};

const bool resnet50_registered =
    (register_builder("resnet50",
                      [](const Config& c) { return std::make_unique<ResNet50Workload>(c); }),
     true);

}  // namespace
}  // namespace tb
