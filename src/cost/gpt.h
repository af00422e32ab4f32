#pragma once
// The gpt family's shape, read once from a config, for its cost description (cost/gpt.cc) and
// its builder (model/gpt.cc), so that both see the same derived widths and capacities.
#include <cstdint>
#include <string>

#include "cost/cost.h"
#include "spec/config.h"

namespace tb {

struct GptShape {
  int64_t batch = 0, layers = 0, d = 0, heads = 0, kv_heads = 0, head_dim = 0, ff = 0, seq = 0,
          vocab = 0, positions = 0, experts = 1, top_k = 1;
  bool swiglu = false, rmsnorm = false, rope = false, tied = true, bias = true;
  double capacity = 1.25, aux_loss = 0.01;
  std::string recompute = "none";  // none, selective (the attention core), full (every block)

  int64_t tokens() const { return batch * seq; }
  int64_t kv_width() const { return kv_heads * head_dim; }
  bool moe() const { return experts > 1; }
  // Token slots per expert per step: capacity x tokens x top_k / experts, rounded up, at
  // most every token (GShard; Switch Transformer). Assignments beyond it are dropped.
  int64_t expert_capacity() const;
};

GptShape gpt_shape(const Config& c);

// Model FLOPs per training step by the conventions of Narayanan et al. 2021 (docs/cost-model.md):
// 2 FLOPs per multiply-accumulate, every matrix product 3 times (forward and two backward
// GEMMs), attention scores over the full s x s (and, as `causal`, halved, as Megatron-LM's
// num_floating_point_operations counts them), logits included; a mixture of experts counts
// the top_k experts each token is routed to, not the capacity-padded work that runs.
ModelFlops gpt_model_flops(const GptShape& g);

}  // namespace tb
