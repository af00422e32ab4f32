// Diagnostic family: a model that misbehaves on purpose (segfault, abort, allocate until
// the memory limit, hang), so the isolation of sweeps can be tested and demonstrated.
#include <csignal>
#include <thread>

#include "model/workload.h"

namespace tb {
namespace {

class FaultWorkload : public Workload {
 public:
  explicit FaultWorkload(const Config& c) : mode_(c.get("mode")), batch_(c.get_int("batch")) {
    w_ = module_.register_parameter("w", torch::ones({4, 4}));
  }
  torch::nn::Module& module() override { return module_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t) override {
    return {{torch::ones({batch_, 4}, torch::TensorOptions().device(device).dtype(dtype))}, {}};
  }
  torch::Tensor loss(const Batch& b) override {
    if (mode_ == "segfault") std::raise(SIGSEGV);
    if (mode_ == "abort") std::abort();
    if (mode_ == "hang")
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (mode_ == "alloc") {
      std::vector<torch::Tensor> hoard;  // 256 MiB at a time, touched, until refused or killed
      for (;;) hoard.push_back(torch::ones({64 << 20}));
    }
    return b.inputs[0].matmul(w_).sum();
  }
  int64_t examples_per_step() const override { return batch_; }

 private:
  torch::nn::Module module_;
  torch::Tensor w_;
  std::string mode_;
  int64_t batch_;
};

const bool fault_registered =
    (register_builder("fault", [](const Config& c) { return std::make_unique<FaultWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
