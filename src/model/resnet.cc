#include "model/resnet.h"

#include "model/activation_point.h"

namespace tb {
namespace nn = torch::nn;

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int64_t c) {
  weight = register_buffer("weight", torch::ones(c));
  bias = register_buffer("bias", torch::zeros(c));
  running_mean = register_buffer("running_mean", torch::zeros(c));
  running_var = register_buffer("running_var", torch::ones(c));
}

torch::Tensor FrozenBatchNorm2dImpl::forward(const torch::Tensor& x) {
  // torchvision folds the statistics into one scale and shift, with eps 1e-5.
  auto scale = weight * (running_var + 1e-5).rsqrt();
  auto shift = bias - running_mean * scale;
  return x * scale.reshape({1, -1, 1, 1}) + shift.reshape({1, -1, 1, 1});
}

namespace {
nn::AnyModule norm(int64_t c, bool frozen) {
  return frozen ? nn::AnyModule(FrozenBatchNorm2d(c)) : nn::AnyModule(nn::BatchNorm2d(c));
}
nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}
}  // namespace

BottleneckImpl::BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, bool frozen) {
  conv1 = register_module("conv1", conv(inplanes, planes, 1, 1, 0));
  bn1 = norm(planes, frozen);
  register_module("bn1", bn1.ptr());
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
  bn2 = norm(planes, frozen);
  register_module("bn2", bn2.ptr());
  conv3 = register_module("conv3", conv(planes, 4 * planes, 1, 1, 0));
  bn3 = norm(4 * planes, frozen);
  register_module("bn3", bn3.ptr());
  if (stride != 1 || inplanes != 4 * planes) {
    downsample = nn::Sequential(conv(inplanes, 4 * planes, 1, stride, 0));
    downsample->push_back(norm(4 * planes, frozen));
    register_module("downsample", downsample);
  }
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  auto y = relu_op(bn1.forward(layer_op(conv1, x)));
  y = relu_op(bn2.forward(layer_op(conv2, y)));
  y = bn3.forward(layer_op(conv3, y));
  return relu_op(y + (downsample ? forward_with_points(downsample, x) : x));
}

ResNetImpl::ResNetImpl(const ResNetOptions& o) {
  conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1 = norm(64, o.frozen_bn);
  register_module("bn1", bn1.ptr());
  int64_t inplanes = 64;
  nn::Sequential* stages[] = {&layer1, &layer2, &layer3, &layer4};
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = 64 << s;
    nn::Sequential seq;
    for (int64_t b = 0; b < o.layers.at(s); ++b) {
      seq->push_back(Bottleneck(inplanes, planes, (s > 0 && b == 0) ? 2 : 1, o.frozen_bn));
      inplanes = 4 * planes;
    }
    *stages[s] = register_module("layer" + std::to_string(s + 1), seq);
  }
  if (o.num_classes > 0) fc = register_module("fc", nn::Linear(inplanes, o.num_classes));

  // torchvision's initialisation: Kaiming normal (fan_out) convolutions, unit BN scale.
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<nn::Conv2d>())
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    else if (auto* b = m->as<nn::BatchNorm2d>()) {
      nn::init::ones_(b->weight);
      nn::init::zeros_(b->bias);
    }
  }
  // Stages below the trainable ones stay fixed, as in torchvision's detection backbones.
  const std::vector<nn::Module*> order = {layer4.get(), layer3.get(), layer2.get(), layer1.get()};
  for (int64_t s = o.trainable_stages; s < 5; ++s) {
    if (s < 4) {
      for (auto& p : order[s]->parameters()) p.set_requires_grad(false);
    } else {
      conv1->weight.set_requires_grad(false);
      for (auto& p : bn1.ptr()->parameters()) p.set_requires_grad(false);
    }
  }
}

std::vector<torch::Tensor> ResNetImpl::stages(const torch::Tensor& x) {
  auto y = relu_op(bn1.forward(layer_op(conv1, x)));
  y = torch::max_pool2d(y, 3, 2, 1);
  std::vector<torch::Tensor> out;
  for (auto* s : {&layer1, &layer2, &layer3, &layer4}) {
    y = (*s)->forward(y);
    out.push_back(y);
  }
  return out;
}

torch::Tensor ResNetImpl::forward(const torch::Tensor& x) {
  auto c5 = stages(x).back();
  return layer_op(fc, torch::flatten(torch::adaptive_avg_pool2d(c5, {1, 1}), 1));
}

}  // namespace tb
