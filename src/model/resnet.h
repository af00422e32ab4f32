#pragma once
// torchvision's ResNet (v1.5: the stride sits on the 3x3 convolution of a bottleneck), with
// torchvision's module names so that parameter names and shapes can be compared one to one
// with the reference definition. Shared by the resnet50 family and the detection backbones.
#include <torch/torch.h>

#include <vector>

namespace tb {

// BatchNorm with fixed statistics and affine terms, all buffers (torchvision's
// FrozenBatchNorm2d, used by its detection backbones): nothing to train, nothing counted
// as a parameter.
struct FrozenBatchNorm2dImpl : torch::nn::Module {
  explicit FrozenBatchNorm2dImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias, running_mean, running_var;
};
TORCH_MODULE(FrozenBatchNorm2d);

struct ResNetOptions {
  std::vector<int64_t> layers{3, 4, 6,
                              3};  // bottleneck blocks per stage: 50 {3,4,6,3}, 101 {3,4,23,3}
  bool frozen_bn = false;          // FrozenBatchNorm2d instead of BatchNorm2d
  int64_t num_classes = 1000;      // 0: no avgpool/fc head (a backbone)
  // Stages, counted from the top, whose parameters train (torchvision's trainable_layers):
  // 5 trains everything, 3 freezes conv1 and layer1 as the detection models do.
  int64_t trainable_stages = 5;
};

struct BottleneckImpl : torch::nn::Module {
  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, bool frozen_bn);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::AnyModule bn1, bn2, bn3;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

struct ResNetImpl : torch::nn::Module {
  explicit ResNetImpl(const ResNetOptions& o);
  // Logits (num_classes > 0).
  torch::Tensor forward(const torch::Tensor& x);
  // The outputs of layer1..layer4 (C2..C5: strides 4, 8, 16, 32; 256..2048 channels).
  std::vector<torch::Tensor> stages(const torch::Tensor& x);
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::AnyModule bn1;
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace tb
