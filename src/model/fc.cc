// ParaDnn fully-connected family: input -> layers x (Linear(nodes) + ReLU) -> Linear(output).
#include "model/activation_point.h"
#include "model/workload.h"

namespace tb {
namespace {

struct FcNetImpl : torch::nn::Module {
  FcNetImpl(int64_t layers, int64_t nodes, int64_t input, int64_t output) {
    int64_t in = input;
    for (int64_t i = 0; i < layers; ++i) {
      body->push_back(torch::nn::Linear(in, nodes));
      body->push_back(torch::nn::ReLU());
      in = nodes;
    }
    body->push_back(torch::nn::Linear(in, output));
    register_module("body", body);
  }
  torch::Tensor forward(const torch::Tensor& x) { return forward_with_points(body, x); }
  torch::nn::Sequential body;
};
TORCH_MODULE(FcNet);

class FcWorkload : public Workload {
 public:
  explicit FcWorkload(const Config& c)
      : net_(c.get_int("layers"), c.get_int("nodes"), c.get_int("input"), c.get_int("output")),
        batch_(c.get_int("batch")),
        input_(c.get_int("input")),
        output_(c.get_int("output")) {}
  torch::nn::Module& module() override { return *net_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    auto opts = torch::TensorOptions().device(device);
    // ParaDnn's inputs: uniform in (-0.5, 0.5).
    auto x = (torch::rand({batch_, input_}, opts) - 0.5).to(dtype);
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
  FcNet net_;
  int64_t batch_, input_, output_;
};

const bool fc_registered =
    (register_builder("fc", [](const Config& c) { return std::make_unique<FcWorkload>(c); }), true);

}  // namespace
}  // namespace tb
