#include "emulation/fashion_mnist.h"

#include <vector>

#include "base/errors.h"
#include "emulation/gzip_file.h"

namespace tb::emu {
namespace {

const char* kRemedy = "Fashion-MNIST: apt-get install dataset-fashion-mnist";

uint32_t be32(const std::vector<uint8_t>& d, size_t at) {
  return uint32_t(d[at]) << 24 | uint32_t(d[at + 1]) << 16 | uint32_t(d[at + 2]) << 8 | d[at + 3];
}

}  // namespace

Dataset load_fashion_mnist(const std::string& split, const std::string& dir) {
  if (split != "train" && split != "test")
    throw UsageError("Fashion-MNIST split '" + split + "' (expected train or test)");
  const std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  const auto img = read_gzip(prefix + "-images-idx3-ubyte.gz", kRemedy);
  const auto lab = read_gzip(prefix + "-labels-idx1-ubyte.gz", kRemedy);
  // IDX: magic 0x00000803 (ubyte, 3 dims) / 0x00000801, then big-endian sizes.
  if (img.size() < 16 || be32(img, 0) != 0x803 || lab.size() < 8 || be32(lab, 0) != 0x801)
    throw UsageError("'" + prefix + "-*-ubyte.gz' is not an IDX file");
  const int64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  if (int64_t(be32(lab, 4)) != n || img.size() != size_t(16 + n * rows * cols) ||
      lab.size() != size_t(8 + n))
    throw UsageError("'" + prefix + "-*-ubyte.gz': sizes do not match");
  Dataset d;
  d.images =
      torch::from_blob(const_cast<uint8_t*>(img.data()) + 16, {n, 1, rows, cols}, torch::kUInt8)
          .to(torch::kFloat)
          .div_(255.0)
          // Fashion-MNIST's training-set mean and standard deviation.
          .sub_(0.2860)
          .div_(0.3530);
  d.labels =
      torch::from_blob(const_cast<uint8_t*>(lab.data()) + 8, {n}, torch::kUInt8).to(torch::kLong);
  return d;
}

}  // namespace tb::emu
