#include "cost/fashion_mnist.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "cost/layers.h"

namespace tb::cost {

StepCost fashion_mnist_cost(const std::string& model, int64_t B) {
  if (B <= 0) throw UsageError(fmt::format("batch must be positive, got {}", B));
  const int64_t eb = 4;
  ModelCost m;
  if (model == "mlp") {
    const int64_t sizes[] = {784, 256, 128, 10};
    for (int i = 0; i < 3; ++i) {
      m.layers.push_back(
          linear(fmt::format("w{}", i), double(B), sizes[i], sizes[i + 1], eb, i > 0));
      if (i < 2) {
        auto r = relu(fmt::format("act{}", i), double(B) * sizes[i + 1], eb);
        r.saved_bytes = r.output_bytes;
        m.layers.push_back(r);
      }
    }
  } else if (model == "cnn") {
    int64_t c = 1, hw = 28;
    for (int i = 0; i < 2; ++i) {
      const int64_t cout = i == 0 ? 8 : 16;
      auto conv = conv2d(fmt::format("c{}", i), {B, c, hw, hw, cout, 5, 1}, eb, i > 0);
      conv.params += cout;  // these convolutions have a bias
      conv.fwd_flops += double(B) * cout * hw * hw;
      conv.saved_bytes += conv.output_bytes;
      m.layers.push_back(conv);
      m.layers.push_back(relu(fmt::format("act{}", i), double(B) * cout * hw * hw, eb));
      m.layers.push_back(
          maxpool(fmt::format("pool{}", i), B, cout, hw * hw, (hw / 2) * (hw / 2), 2, eb));
      c = cout, hw /= 2;
    }
    m.layers.push_back(linear("w", double(B), c * hw * hw, 10, eb, true));
  } else {
    throw UsageError("unknown emulation model '" + model + "' (expected mlp or cnn)");
  }
  m.layers.push_back(softmax_xent("loss", double(B), 10, eb));
  m.input_bytes = double(B) * 784 * eb + 8.0 * B;
  return step_cost(std::move(m), "momentum", eb);
}

std::string fashion_mnist_cost_config(const std::string& model, int64_t batch) {
  return fmt::format("fashion-mnist-{}:batch={}", model, batch);
}

bool parse_fashion_mnist_cost_config(const std::string& text, std::string* model, int64_t* batch) {
  const std::string prefix = "fashion-mnist-";
  const auto colon = text.find(":batch=");
  if (text.rfind(prefix, 0) != 0 || colon == std::string::npos) return false;
  *model = text.substr(prefix.size(), colon - prefix.size());
  try {
    size_t used = 0;
    *batch = std::stoll(text.substr(colon + 7), &used);
    return used == text.size() - colon - 7 && (*model == "mlp" || *model == "cnn");
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace tb::cost
