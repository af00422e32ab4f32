#include "model/detection_common.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "base/errors.h"
#include "model/activation_point.h"

namespace tb::det {
namespace nn = torch::nn;

namespace {
nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  nn::Conv2d c(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2));
  // torchvision's FPN initialisation.
  nn::init::kaiming_uniform_(c->weight, 1.0);
  nn::init::zeros_(c->bias);
  return c;
}
}  // namespace

FpnImpl::FpnImpl(const std::vector<int64_t>& in_channels, int64_t out, FpnExtra e) : extra(e) {
  for (int64_t c : in_channels) {
    // Sequential keeps torchvision's names (inner_blocks.0.0.weight: Conv2dNormActivation).
    inner_blocks->push_back(nn::Sequential(conv(c, out, 1, 1)));
    layer_blocks->push_back(nn::Sequential(conv(out, out, 3, 1)));
  }
  register_module("inner_blocks", inner_blocks);
  register_module("layer_blocks", layer_blocks);
  if (extra == FpnExtra::kP6P7) {
    auto blocks = register_module("extra_blocks", std::make_shared<nn::Module>());
    p6 = blocks->register_module("p6", conv(out, out, 3, 2));
    p7 = blocks->register_module("p7", conv(out, out, 3, 2));
  }
}

std::vector<torch::Tensor> FpnImpl::forward(const std::vector<torch::Tensor>& x) {
  const size_t n = x.size();
  auto run = [](nn::ModuleList& l, size_t i, const torch::Tensor& t) {
    nn::Sequential s(std::dynamic_pointer_cast<nn::SequentialImpl>(l[i]));
    return forward_with_points(s, t);
  };
  std::vector<torch::Tensor> out(n);
  auto last = run(inner_blocks, n - 1, x[n - 1]);
  out[n - 1] = run(layer_blocks, n - 1, last);
  for (size_t i = n - 1; i-- > 0;) {
    auto lateral = run(inner_blocks, i, x[i]);
    auto top_down = nn::functional::interpolate(
        last, nn::functional::InterpolateFuncOptions()
                  .size(std::vector<int64_t>{lateral.size(2), lateral.size(3)})
                  .mode(torch::kNearest));
    last = lateral + top_down;
    out[i] = run(layer_blocks, i, last);
  }
  if (extra == FpnExtra::kMaxPool) {
    out.push_back(torch::max_pool2d(out.back(), 1, 2, 0));
  } else {
    auto p6_out = layer_op(p6, out.back());  // from P5: in and out channels are equal
    out.push_back(p6_out);
    out.push_back(layer_op(p7, relu_op(p6_out)));
  }
  return out;
}

DetectionData::DetectionData(const Config& c)
    : batch(c.get_int("batch")),
      height(c.get_int("height")),
      width(c.get_int("width")),
      max_boxes(c.get_int("max_boxes")) {
  // GeneralizedRCNNTransform pads to multiples of 32; generated images are already there.
  for (auto [key, v] : {std::pair{"height", height}, std::pair{"width", width}})
    if (v % 32 != 0)
      throw UsageError(
          fmt::format("{}={}: must be a multiple of 32 (the FPN's coarsest stride)", key, v));
}

Batch DetectionData::make(torch::Device device, torch::Dtype dtype, uint64_t seed) const {
  auto gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.inputs.push_back(at::rand({batch, 3, height, width}, gen).to(device, dtype));
  std::vector<int64_t> counts;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t n = at::randint(1, max_boxes + 1, {1}, gen).item<int64_t>();
    counts.push_back(n);
    // Centres anywhere in the image, sides 5%..50% of the image's, clipped to it: every
    // box keeps at least half its side inside, so all are valid (x2 > x1, y2 > y1).
    auto u = at::rand({n, 4}, gen);
    auto cx = u.select(1, 0) * double(width), cy = u.select(1, 1) * double(height);
    auto w = (0.05 + 0.45 * u.select(1, 2)) * double(width);
    auto h = (0.05 + 0.45 * u.select(1, 3)) * double(height);
    auto boxes = torch::stack(
        {(cx - w / 2).clamp_min(0), (cy - h / 2).clamp_min(0),
         (cx + w / 2).clamp_max(double(width)), (cy + h / 2).clamp_max(double(height))},
        1);
    b.inputs.push_back(boxes.to(device));
    b.inputs.push_back(at::randint(1, 91, {n}, gen, torch::kLong).to(device));
  }
  b.target = torch::tensor(counts, torch::kLong).to(device);
  return b;
}

Targets DetectionData::targets(const Batch& b) {
  Targets t;
  for (size_t i = 1; i + 1 < b.inputs.size(); i += 2) {
    t.boxes.push_back(b.inputs[i]);
    t.labels.push_back(b.inputs[i + 1]);
  }
  return t;
}

torch::Tensor normalize(const torch::Tensor& images) {
  auto o = images.options();
  auto mean = torch::tensor({0.485, 0.456, 0.406}, o).view({1, 3, 1, 1});
  auto std = torch::tensor({0.229, 0.224, 0.225}, o).view({1, 3, 1, 1});
  return (images - mean) / std;
}

void calibrate_frozen_bn(ResNetImpl& net) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(12345);
  auto x = normalize(at::rand({2, 3, 128, 128}, gen));
  auto set = [](nn::AnyModule& bn, const torch::Tensor& in) {
    auto* f = bn.ptr()->as<FrozenBatchNorm2dImpl>();
    f->running_mean.copy_(in.mean({0, 2, 3}));
    f->running_var.copy_(in.var({0, 2, 3}, /*unbiased=*/false));
    return bn.forward(in);
  };
  auto y = torch::relu(set(net.bn1, net.conv1->forward(x)));
  y = torch::max_pool2d(y, 3, 2, 1);
  for (auto* stage : {&net.layer1, &net.layer2, &net.layer3, &net.layer4}) {
    for (const auto& m : (*stage)->children()) {
      auto& b = *m->as<BottleneckImpl>();
      auto o = torch::relu(set(b.bn1, b.conv1->forward(y)));
      o = torch::relu(set(b.bn2, b.conv2->forward(o)));
      o = set(b.bn3, b.conv3->forward(o));
      auto skip = y;
      if (b.downsample) {
        auto ds = b.downsample->ptr(0)->as<nn::Conv2dImpl>()->forward(y);
        auto* f = b.downsample->ptr(1)->as<FrozenBatchNorm2dImpl>();
        f->running_mean.copy_(ds.mean({0, 2, 3}));
        f->running_var.copy_(ds.var({0, 2, 3}, false));
        skip = f->forward(ds);
      }
      y = torch::relu(o + skip);
    }
  }
}

}  // namespace tb::det
