#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/errors.h"
#include "cost/cost.h"
#include "cost/layers.h"

namespace tb {
namespace {
std::map<std::string, CostDescription>& descriptions() {
  static std::map<std::string, CostDescription> d;
  return d;
}
}  // namespace

void register_cost(const std::string& family, CostDescription cost) {
  descriptions()[family] = std::move(cost);
}

bool has_cost(const std::string& family) { return descriptions().count(family) > 0; }

StepCost step_cost(const Config& config) {
  auto it = descriptions().find(config.family());
  if (it == descriptions().end())
    throw UsageError(fmt::format(
        "no cost description for family '{}': its FLOPs are counted by the profiler when it "
        "runs (trainbench run or profile)",
        config.family()));
  const int64_t eb = dtype_bytes(config.get("dtype"));
  return step_cost(it->second(config, eb), config.get("optimizer"), eb);
}

StepCost step_cost(ModelCost model, const std::string& optimizer, int64_t eb) {
  StepCost s;
  s.layers = std::move(model.layers);
  s.model_flops = model.model_flops;
  double largest_output = 0;
  for (const auto& l : s.layers) {
    s.params += l.params;
    s.fwd_flops += l.fwd_flops;
    s.fwd_matmul_flops += l.fwd_matmul_flops;
    s.bwd_flops += l.bwd_input_flops + l.bwd_weight_flops;
    s.bytes += l.bytes_read + l.bytes_written;
    s.memory.feature_maps += l.saved_bytes;
    largest_output = std::max(largest_output, l.output_bytes);
  }
  const auto opt = cost::optimizer(optimizer);
  int64_t frozen = 0;
  for (const auto& l : s.layers) frozen += l.frozen_params;
  // Frozen parameters (torchvision's detection backbones freeze the stem and layer1) take
  // no gradient, no optimizer state and no update.
  const double p = double(s.params), trainable = double(s.params - frozen);
  s.opt_flops = opt.flops_per_param * trainable * model.optimizer_updates;
  s.opt_bytes =
      eb * (opt.reads_per_param + opt.writes_per_param) * trainable * model.optimizer_updates;
  s.opt_pass_bytes = eb * (opt.pass_reads_per_param + opt.pass_writes_per_param) * trainable *
                     model.optimizer_updates;
  s.optimizer = optimizer;
  s.opt_params = trainable * model.optimizer_updates;
  s.opt_passes = trainable > 0 ? opt.pass_writes_per_param * model.optimizer_updates : 0;
  s.bytes += s.opt_bytes;
  s.memory.weights = eb * p;
  s.memory.gradients =
      eb * (model.gradient_params_at_once > 0 ? double(model.gradient_params_at_once) : trainable);
  const double state =
      model.optimizer_state_per_param > 0 ? model.optimizer_state_per_param : opt.state_per_param;
  s.memory.optimizer_state = eb * state * trainable;
  s.memory.inputs = model.input_bytes;
  s.memory.references = model.memory_references;
  // During backward the gradient of the largest activation and the gradient of its
  // input are alive together with everything saved.
  s.memory.workspace = 2 * largest_output;
  if (model.workers > 1) {
    DataParallelCost& dp = s.data_parallel;
    dp.workers = model.workers;
    dp.zero = model.zero;
    dp.shard = (int64_t(trainable) + model.workers - 1) / model.workers;
    const double shard = double(dp.shard), n = double(model.workers), P = eb * trainable;
    if (model.zero >= 1) s.memory.optimizer_state = eb * state * shard;
    if (model.zero >= 2) s.memory.gradients = eb * shard;
    if (model.zero >= 3) s.memory.weights = eb * shard;
    dp.ideal_bytes_per_step = (model.zero >= 3 ? 3 : 2) * (n - 1) / n * P;
    dp.run_bytes_per_step = model.zero == 0   ? 2 * (n - 1) / n * P
                            : model.zero == 1 ? 2 * (n - 1) / n * P + (n - 1) * shard * eb
                                              : 0;
    s.memory.references.push_back(
        {fmt::format("sent per worker per step, ZeRO stage {} over {} workers (ring collectives, "
                     "Rajbhandari et al. 2020); the estimate above is per worker, a one-process "
                     "measurement is not sharded",
                     model.zero, model.workers),
         dp.ideal_bytes_per_step});
    if (dp.run_bytes_per_step > 0)
      s.memory.references.push_back(
          {"sent per worker per step as trainbench runs it on Gloo", dp.run_bytes_per_step});
  }
  return s;
}

}  // namespace tb
