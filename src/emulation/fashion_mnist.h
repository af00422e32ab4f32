// Fashion-MNIST from Debian's dataset-fashion-mnist package: gzipped IDX files under
// /usr/share/datasets/fashion-mnist (train 60000, test 10000 images of 28x28, 10 classes).
#pragma once
#include <torch/torch.h>

#include <string>

namespace tb::emu {

struct Dataset {
  torch::Tensor images;  // [n, 1, 28, 28] float32, scaled to [0, 1] then standardised
  torch::Tensor labels;  // [n] int64
};

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// split: "train" or "test". Throws UsageError naming the file when it is missing or malformed
// (install the Debian package dataset-fashion-mnist).
Dataset load_fashion_mnist(const std::string& split, const std::string& dir = kFashionMnistDir);

}  // namespace tb::emu
