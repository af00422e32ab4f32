#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/family.h"

namespace tb {

// One synthetic mini-batch, built once and reused for every timed step.
struct Batch {
  std::vector<torch::Tensor> inputs;
  torch::Tensor target;
};

// A trainable model with its data: the runner only calls these.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual torch::nn::Module& module() = 0;
  // Synthetic data, on the device and in the config's dtype.
  virtual Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) = 0;
  // Forward pass and loss (softmax cross-entropy for the generated families).
  virtual torch::Tensor loss(const Batch& batch) = 0;
  // Examples (the family's throughput unit) consumed by one step.
  virtual int64_t examples_per_step() const = 0;
};

using WorkloadBuilder = std::function<std::unique_ptr<Workload>(const Config&)>;

// A family is added by one call to this (in model/<family>.cc) plus one cost
// description (cost/<family>.cc); nothing else needs to change.
void register_family(FamilySchema schema, WorkloadBuilder builder);
std::unique_ptr<Workload> build_workload(const Config& config);

torch::Dtype dtype_of(const Config& config);

}  // namespace tb
