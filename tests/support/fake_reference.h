#pragma once
// A tiny reference model ("fake_reference": task, unit and batch sweep set) registered by the
// tests that need one, since the real reference families live in their own files and a
// test must not depend on which of them a build has. Registered in this test binary only.
#include "cost/cost.h"
#include "cost/layers.h"
#include "model/workload.h"

namespace tb::testing {

inline constexpr const char* kFakeReference = "fake_reference";

class FakeReferenceWorkload : public Workload {
 public:
  explicit FakeReferenceWorkload(const Config& c) : net_(16, 4), batch_(c.get_int("batch")) {}
  torch::nn::Module& module() override { return *net_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    return {
        {torch::rand({batch_, 16}, torch::TensorOptions().device(device)).to(dtype)},
        torch::randint(0, 4, {batch_}, torch::TensorOptions().device(device).dtype(torch::kLong))};
  }
  torch::Tensor loss(const Batch& b) override {
    return torch::nn::functional::cross_entropy(net_->forward(b.inputs[0]), b.target);
  }
  int64_t examples_per_step() const override { return batch_; }
  // Two "images" per example, so units and examples differ.
  double units_per_step() const override { return 2.0 * double(batch_); }

 private:
  torch::nn::Linear net_;
  int64_t batch_;
};

inline void register_fake_reference() {
  static const bool once = [] {
    FamilySchema s;
    s.name = kFakeReference;
    s.summary = "test-only reference model: Linear(16, 4)";
    s.example = "fake_reference:batch=4";
    s.task = "image classification";
    s.throughput_unit = "images";
    s.batch_sweep = {8, 2, 4};
    for (auto& p : common_params(4, "momentum")) s.params.push_back(p);
    register_family_schema(s);
    register_builder(kFakeReference,
                     [](const Config& c) { return std::make_unique<FakeReferenceWorkload>(c); });
    register_cost(kFakeReference, [](const Config& c, int64_t eb) {
      const int64_t b = c.get_int("batch");
      ModelCost m;
      m.layers.push_back(cost::linear("net", double(b), 16, 4, eb, false));
      m.layers.push_back(cost::softmax_xent("loss", double(b), 4, eb));
      m.input_bytes = double(b) * 16 * eb + 8.0 * b;
      return m;
    });
    return true;
  }();
  (void)once;
}

}  // namespace tb::testing
