#include "runner/torchscript.h"

#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

namespace tb {
namespace {

class TracedWorkload : public Workload {
 public:
  TracedWorkload(std::unique_ptr<Workload> eager, const Batch& example) : eager_(std::move(eager)) {
    params_ = eager_->module().parameters();
    // Buffers (batch-norm running statistics) are inputs too, so the graph updates the
    // module's own tensors instead of frozen copies.
    buffers_ = eager_->module().buffers();
    n_inputs_ = example.inputs.size();
    torch::jit::Stack in = stack_of(example);
    auto traced = torch::jit::tracer::trace(
        in,
        [this](torch::jit::Stack s) -> torch::jit::Stack {
          Batch b;
          for (size_t i = 0; i < n_inputs_; ++i) b.inputs.push_back(s[i].toTensor());
          b.target = s[n_inputs_].toTensor();
          return {eager_->loss(b)};
        },
        [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/true,
        /*force_outplace=*/false);
    executor_ = std::make_unique<torch::jit::GraphExecutor>(traced.first->graph, "loss");
  }

  torch::nn::Module& module() override { return eager_->module(); }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    return eager_->make_batch(device, dtype, seed);
  }
  torch::Tensor loss(const Batch& batch) override {
    torch::jit::Stack s = stack_of(batch);
    executor_->run(s);
    return s.back().toTensor();
  }
  int64_t examples_per_step() const override { return eager_->examples_per_step(); }

 private:
  torch::jit::Stack stack_of(const Batch& b) const {
    torch::jit::Stack s(b.inputs.begin(), b.inputs.end());
    s.push_back(b.target);
    for (const auto& p : params_) s.push_back(p);
    for (const auto& t : buffers_) s.push_back(t);
    return s;
  }
  std::unique_ptr<Workload> eager_;
  std::vector<torch::Tensor> params_, buffers_;
  size_t n_inputs_ = 0;
  std::unique_ptr<torch::jit::GraphExecutor> executor_;
};

}  // namespace

std::unique_ptr<Workload> trace_workload(std::unique_ptr<Workload> eager, const Batch& example) {
  return std::make_unique<TracedWorkload>(std::move(eager), example);
}

}  // namespace tb
