#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "spec/config.h"

namespace tb {

// What one layer of a training step asks of the hardware. Computed from the config,
// never measured. Conventions (FLOP = 2 x MAC, what counts for BN, pooling, the RNN
// gates, ...) are written down once, in docs/cost-model.md.
struct LayerCost {
  std::string name;  // position in the model, e.g. "group2.block0.conv2"
  std::string op;    // linear, conv2d, batchnorm, relu, maxpool, avgpool, add, embedding,
                     // rnn, lstm, gru, softmax_xent
  int64_t params = 0;
  int64_t frozen_params = 0;  // of those, the ones that take no gradient and no update
  // FP8 recipes leave this layer in the half format (simulate's amp-fp8): a language model's
  // projection onto its vocabulary (Megatron-LM's output layer is not an FP8 module) and an
  // MoE router (Megatron-LM and Transformer Engine route in higher precision).
  bool keep_half_in_fp8 = false;
  double fwd_flops = 0;         // all forward FLOPs of the layer
  double fwd_matmul_flops = 0;  // the GEMM / convolution part of fwd_flops
  double bwd_input_flops = 0;   // gradient with respect to the layer's input
  double bwd_weight_flops = 0;  // gradient with respect to its parameters
  double bytes_read = 0;        // forward + backward, at the config's dtype
  double bytes_written = 0;
  // Of bytes_read + bytes_written, those that automatic mixed precision keeps in fp32 while
  // the rest runs in the half format (the attention's score passes: autocast runs softmax in
  // fp32). Layers whose whole op autocast runs in fp32 (softmax_xent, layernorm, rmsnorm)
  // need not set it.
  double fp32_bytes = 0;
  // Of saved_bytes, those autocast keeps in fp32, and besides them the half-format copies it
  // saves too (the attention's probabilities: softmax saves its fp32 output for its backward,
  // the product with V the half copy it was cast to). Whole-op fp32 layers need not set it.
  double fp32_saved_bytes = 0;
  // Where a GPU's eager kernels move more than bytes_read + bytes_written (whole-tensor passes
  // a CPU's row-at-a-time kernels keep in cache): their bytes, which GPU descriptions use.
  // 0: the same.
  double gpu_pass_bytes = 0;
  double saved_bytes = 0;   // tensors this layer creates that stay alive until backward
  double output_bytes = 0;  // its forward output
  // Elements of the layer's largest activation tensor (input or output), for layers whose
  // work is elementwise (normalization, pooling, activations, adds): what their measured
  // per-element cost (the platform's efficiency.op_ns_per_element) multiplies. 0: not one.
  double elements = 0;
  // The forward GEMM as (M x K) times (K x N), done gemm_count times (convolutions as
  // im2col, recurrent layers once per time step); zero for layers without one. The
  // simulator maps it and its two backward GEMMs onto a systolic array.
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0, gemm_count = 0;
};

// Memory a training step needs, by TBD's categories (bytes).
// A figure to read the estimate against, outside its total: a published formula's count
// (gpt: Korthikanti et al. 2022's activations per layer) or what an option changes.
struct MemoryReference {
  std::string label;
  double bytes = 0;
};

struct MemoryEstimate {
  double weights = 0, gradients = 0, optimizer_state = 0, feature_maps = 0, inputs = 0,
         workspace = 0;
  std::vector<MemoryReference> references;
  double total() const {
    return weights + gradients + optimizer_state + feature_maps + inputs + workspace;
  }
};

// Model FLOPs of a training step by a published convention, for families that have one (gpt:
// Narayanan et al. 2021, docs/cost-model.md): what MFU divides by. Unlike StepCost's own counts
// (what runs: every elementwise operation, capacity-padded experts), only the matrix products
// the model needs, each counted 3 times (forward, input and weight gradients).
struct ModelFlops {
  double total = 0;   // 0: the family has no such convention
  double causal = 0;  // the same with the attention scores of a causal mask halved
  // total split by part: attention_scores, projections, mlp (experts and router), logits
  std::map<std::string, double> parts;
};

// Data parallelism with ZeRO (Rajbhandari et al. 2020): what each of `workers` holds and sends
// per step. Stage 1 shards the optimizer state, 2 also the gradients, 3 also the weights; a
// shard is ceil(parameters / workers) elements (the flat, padded partition of
// runner/distributed.cc's ZeRO-1). Bytes sent per worker per step, at the dtype, for the
// collectives of a ring: all-reduce 2 (N-1)/N P, reduce-scatter and all-gather (N-1)/N P each.
struct DataParallelCost {
  int64_t workers = 1;
  int zero = 0;
  int64_t shard = 0;  // parameters per shard
  // Ideal ZeRO (reduce-scatter where it can): stages 0-2 2 (N-1)/N P, stage 3 3 (N-1)/N P.
  double ideal_bytes_per_step = 0;
  // As trainbench runs it on Gloo in LibTorch 1.13: stage 0 an all-reduce; stage 1 an
  // all-reduce and an all-gather of the weights, 3 (N-1)/N P. 0 for stages it does not run.
  double run_bytes_per_step = 0;
};

struct StepCost {
  // "analytic": from the family's cost description; "profiler": counted from one profiled
  // training step, for models without one (runner/profile.h measured_step_cost).
  std::string source = "analytic";
  std::vector<LayerCost> layers;
  int64_t params = 0;
  double fwd_flops = 0, fwd_matmul_flops = 0, bwd_flops = 0, opt_flops = 0;
  double opt_bytes = 0;       // the update's distinct tensors, each once
  double opt_pass_bytes = 0;  // every pass of the eager update from memory (cost/layers.h)
  std::string optimizer;      // the `optimizer` config value
  double opt_params = 0;      // parameters the step updates, times the updates per step
  // The update's passes over its tensors (each in-place or out-of-place operation of the eager
  // update), times the updates per step: one multi-tensor launch each where a framework
  // updates every tensor at once (torch.optim's foreach, its default on CUDA).
  double opt_passes = 0;
  double bytes = 0;       // all bytes read + written in the step, optimizer included
  MemoryEstimate memory;  // per worker
  ModelFlops model_flops;
  DataParallelCost data_parallel;
  double flops() const { return fwd_flops + bwd_flops + opt_flops; }
  double intensity() const { return bytes > 0 ? flops() / bytes : 0; }
};

// What a family's cost description returns for one config: its layers in forward
// order and the bytes of one mini-batch of inputs and labels. The optimizer,
// totals and the memory estimate are added by step_cost().
struct ModelCost {
  std::vector<LayerCost> layers;
  double input_bytes = 0;
  // Optimizer updates per parameter per step, on average: more than 1 where a step updates
  // some weights several times (WGAN-GP's critic, A3C's shared weights once per actor).
  double optimizer_updates = 1;
  // Parameters whose gradients are alive at the same time, where not all trainable ones are
  // (WGAN-GP frees the critic's before the generator's update): 0 means all.
  int64_t gradient_params_at_once = 0;
  // Optimizer state per parameter, where the family steps with its own optimizer rather than
  // the config's (A3C's shared RMSprop keeps one buffer, no momentum): 0 means the config's.
  double optimizer_state_per_param = 0;
  ModelFlops model_flops;
  std::vector<MemoryReference> memory_references;  // copied to the estimate
  // Data-parallel workers and ZeRO stage, for families that shard across them (gpt): the
  // memory estimate is then per worker.
  int64_t workers = 1;
  int zero = 0;
};
using CostDescription = std::function<ModelCost(const Config&, int64_t elem_bytes)>;

void register_cost(const std::string& family, CostDescription cost);
bool has_cost(const std::string& family);
StepCost step_cost(const Config& config);
// The same for a model described directly (the emulation phase's Fashion-MNIST models),
// at `elem_bytes` per element, trained with `optimizer` (sgd, momentum, rmsprop, adam).
StepCost step_cost(ModelCost model, const std::string& optimizer, int64_t elem_bytes);

}  // namespace tb
