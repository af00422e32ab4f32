// Schema, named configs and cost description of the gpt family (model/gpt.cc): a parameterized
// decoder-only transformer with pre-norm blocks, grouped-query causal self-attention, a GELU or
// SwiGLU feed-forward or a token-choice top-k mixture of experts, learned or rotary positions
// and a tied or separate output projection. docs/cost-model.md gives the conventions.
#include "cost/gpt.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "base/errors.h"
#include "cost/layers.h"
#include "spec/family.h"

namespace tb {

int64_t GptShape::expert_capacity() const {
  const double slots = std::ceil(capacity * double(tokens()) * double(top_k) / double(experts));
  return std::max<int64_t>(1, std::min<int64_t>(tokens(), int64_t(slots)));
}

GptShape gpt_shape(const Config& c) {
  GptShape g;
  g.batch = c.get_int("batch");
  g.layers = c.get_int("layers");
  g.d = c.get_int("d_model");
  g.heads = c.get_int("heads");
  g.kv_heads = c.get_int("kv_heads");
  g.head_dim = g.d / g.heads;
  g.ff = c.get_int("ff");
  g.seq = c.get_int("seq");
  g.vocab = c.get_int("vocab");
  g.positions = c.get_int("positions");
  g.experts = c.get_int("experts");
  g.top_k = c.get_int("top_k");
  g.swiglu = c.get("act") == "swiglu";
  g.rmsnorm = c.get("norm") == "rmsnorm";
  g.rope = c.get("pos") == "rope";
  g.tied = c.get("tied") == "on";
  g.bias = c.get("bias") == "on";
  g.capacity = std::stod(c.get("capacity"));
  g.aux_loss = std::stod(c.get("aux_loss"));
  g.recompute = c.get("recompute");
  return g;
}

ModelFlops gpt_model_flops(const GptShape& g) {
  const double T = double(g.tokens()), d = double(g.d), L = double(g.layers);
  // Forward FLOPs per layer, then x3 for the two backward GEMMs of every product.
  const double projections = 2 * T * d * (d + 2 * double(g.kv_width())) + 2 * T * d * d;
  const double scores = 2 * 2 * double(g.batch) * double(g.seq) * double(g.seq) * d;
  const double one_mlp = (g.swiglu ? 3 : 2) * 2 * T * d * double(g.ff);
  const double mlp = g.moe() ? double(g.top_k) * one_mlp + 2 * T * d * double(g.experts) : one_mlp;
  const double logits = 2 * T * d * double(g.vocab);
  ModelFlops m;
  m.parts["attention_scores"] = 3 * L * scores;
  m.parts["projections"] = 3 * L * projections;
  m.parts["mlp"] = 3 * L * mlp;
  m.parts["logits"] = 3 * logits;
  for (const auto& [part, flops] : m.parts) m.total += flops;
  m.causal = m.total - m.parts["attention_scores"] / 2;
  return m;
}

namespace {

// A real-valued parameter (capacity factor, loss weight): its canonical text, or a UsageError.
ParamSpec real_param(const std::string& name, const std::string& help, const std::string& def,
                     double lo, double hi) {
  ParamSpec p{name, help, def, 0, 0, {}};
  p.text = [name, lo, hi](const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !std::isfinite(x))
      throw UsageError(fmt::format("gpt: {}={}: not a number", name, v));
    if (x < lo || x > hi)
      throw UsageError(fmt::format("gpt: {}={}: out of range [{}, {}]", name, v, lo, hi));
    return fmt::format("{}", x);
  };
  return p;
}

// The checks between parameters, and the widths that default from others, so that a config
// is refused, or written out in full, before anything is built.
void finalize_gpt(Config& c) {
  const int64_t d = c.get_int("d_model"), heads = c.get_int("heads");
  if (d % heads != 0)
    throw UsageError(fmt::format("gpt: d_model={} is not divisible by heads={}", d, heads));
  if (c.get_int("kv_heads") == 0) c.set("kv_heads", std::to_string(heads));
  const int64_t kv = c.get_int("kv_heads");
  if (kv > heads || heads % kv != 0)
    throw UsageError(fmt::format("gpt: heads={} is not divisible by kv_heads={}", heads, kv));
  if (c.get("pos") == "rope" && (d / heads) % 2 != 0)
    throw UsageError(
        fmt::format("gpt: pos=rope needs an even head width; d_model={} / heads={} is {}", d, heads,
                    d / heads));
  if (c.get_int("top_k") > c.get_int("experts"))
    throw UsageError(
        fmt::format("gpt: top_k={} is more than experts={}", c.get("top_k"), c.get("experts")));
  if (c.get_int("ff") == 0) {
    // GELU: 4 x d_model; SwiGLU: 2/3 of that (three matrices instead of two), rounded up to a
    // multiple of 64, as LLaMA sizes it.
    const int64_t ff = c.get("act") == "swiglu" ? (8 * d / 3 + 63) / 64 * 64 : 4 * d;
    c.set("ff", std::to_string(ff));
  }
  if (c.get_int("zero") > 0 && c.get_int("workers") < 2)
    throw UsageError("gpt: zero=" + c.get("zero") +
                     " shards over data-parallel workers: it needs workers > 1");
  const int64_t seq = c.get_int("seq");
  if (c.get("pos") == "learned") {
    if (c.get_int("positions") == 0) c.set("positions", std::to_string(seq));
    if (seq > c.get_int("positions"))
      throw UsageError(fmt::format("gpt: seq={} is more than positions={} (learned positions)", seq,
                                   c.get("positions")));
  } else if (c.get_int("positions") != 0) {
    throw UsageError("gpt: positions=" + c.get("positions") +
                     " applies to pos=learned only (rotary positions have no table)");
  }
}

ModelCost gpt_cost(const Config& c, int64_t eb);

// The activation memory beside published counts: Korthikanti et al. 2022 ("Reducing
// Activation Recomputation in Large Transformer Models", eq. 1 and section 5) count, per layer,
// sbh(34 + 5as/h) bytes without recomputation, 34sbh with selective and 2sbh with full, for
// 16-bit activations with 1-byte dropout masks; this family has no dropout and keeps its own
// dtype, so the two differ by design. And what recomputation saves against none.
std::vector<MemoryReference> activation_references(const Config& c, const GptShape& g,
                                                   const std::vector<LayerCost>& layers,
                                                   int64_t eb) {
  const double s = double(g.seq), b = double(g.batch), h = double(g.d), a = double(g.heads);
  const double sbh = s * b * h;
  std::vector<MemoryReference> out;
  double own = 0;
  for (const auto& l : layers)
    if (l.name.rfind("layer", 0) == 0) own += l.saved_bytes;
  out.push_back(
      {"activations per layer, trainbench's count (feature maps of the blocks / "
       "layers)",
       own / double(g.layers)});
  if (g.recompute == "none")
    out.push_back(
        {"activations per layer, Korthikanti et al. 2022: sbh(34 + 5as/h) (16-bit, "
         "dropout masks)",
         sbh * (34 + 5 * a * s / h)});
  else if (g.recompute == "selective")
    out.push_back(
        {"activations per layer, Korthikanti et al. 2022, selective: 34sbh (16-bit, "
         "dropout masks)",
         34 * sbh});
  else
    out.push_back({"activations per layer, Korthikanti et al. 2022, full: 2sbh (16-bit)", 2 * sbh});
  if (g.recompute != "none") {
    Config none = c;
    none.set("recompute", "none");
    double all = 0, now = 0;
    for (const auto& l : gpt_cost(none, eb).layers) all += l.saved_bytes;
    for (const auto& l : layers) now += l.saved_bytes;
    out.push_back({"feature maps recompute=" + g.recompute + " saves (against none)", all - now});
  }
  return out;
}

ModelCost gpt_cost(const Config& c, int64_t eb) {
  const GptShape g = gpt_shape(c);
  const double T = double(g.tokens()), d = double(g.d);
  ModelCost m;
  auto& out = m.layers;
  auto linear = [&](const std::string& name, double rows, int64_t in, int64_t o, bool bias) {
    out.push_back(bias ? cost::linear(name, rows, in, o, eb, true)
                       : cost::linear_nobias(name, rows, in, o, eb, true));
  };
  auto norm = [&](const std::string& name) {
    out.push_back(g.rmsnorm ? cost::rmsnorm(name, T, g.d, eb) : cost::layernorm(name, T, g.d, eb));
  };
  // One feed-forward block on `rows` rows (all tokens, or one expert's capacity).
  auto mlp = [&](const std::string& p, double rows) {
    if (g.swiglu) {
      linear(p + ".gate", rows, g.d, g.ff, g.bias);
      linear(p + ".up", rows, g.d, g.ff, g.bias);
      // silu(gate) = gate * sigmoid(gate): 4 forward, 6 backward; times up: 1 and 2
      out.push_back(cost::elementwise(p + ".silu", "silu", rows * g.ff, 4, 6, 1, eb));
      out.push_back(cost::elementwise(p + ".gated", "mul", rows * g.ff, 1, 2, 2, eb));
      linear(p + ".down", rows, g.ff, g.d, g.bias);
    } else {
      linear(p + ".fc1", rows, g.d, g.ff, g.bias);
      // tanh-approximated GELU: 9 FLOPs forward, 14 for its derivative (tanh counted as 1)
      out.push_back(cost::elementwise(p + ".gelu", "gelu", rows * g.ff, 9, 14, 1, eb));
      linear(p + ".fc2", rows, g.ff, g.d, g.bias);
    }
  };

  out.push_back(cost::embedding("embed", T, g.vocab, g.d, eb));
  if (!g.rope) {
    out.push_back(cost::embedding("pos_embed", T, g.positions, g.d, eb));
    out.push_back(cost::add("embed.add_positions", T * d, eb));
  }
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string p = fmt::format("layer{}", i);
    const size_t first = out.size();
    norm(p + ".norm1");
    linear(p + ".attn.qkv", T, g.d, g.d + 2 * g.kv_width(), g.bias);
    if (g.rope)  // q * cos + rotate_half(q) * sin, and the same for k
      out.push_back(
          cost::elementwise(p + ".attn.rope", "rope", T * (d + double(g.kv_width())), 3, 3, 0, eb));
    if (g.kv_heads < g.heads)  // keys and values copied out to every query head
      out.push_back(cost::elementwise(p + ".attn.repeat_kv", "copy", 2 * T * d, 0, 1, 0, eb));
    // The causal mask is added to the scores (1 FLOP each); queries are scaled first.
    out.push_back(cost::attention(p + ".attn", g.batch, g.heads, g.seq, g.seq, g.d, g.d, 1,
                                  /*dropout=*/false, /*q_scale=*/true, eb));
    linear(p + ".attn.out", T, g.d, g.d, g.bias);
    out.push_back(cost::add(p + ".attn.residual", T * d, eb));
    norm(p + ".norm2");
    if (!g.moe()) {
      mlp(p + ".mlp", T);
    } else {
      const double E = double(g.experts), k = double(g.top_k), C = double(g.expert_capacity());
      linear(p + ".moe.router", T, g.d, g.experts, false);
      out.back().keep_half_in_fp8 = true;
      // softmax (5), top-k selection (1 per candidate); the load-balancing loss (2 per
      // probability)
      out.push_back(cost::elementwise(p + ".moe.route", "route", T * E, 8, 5, 1, eb));
      // every expert runs on all its capacity slots, filled or not
      out.push_back(cost::elementwise(p + ".moe.dispatch", "copy", E * C * d, 0, 1, 0, eb));
      for (int64_t e = 0; e < g.experts; ++e) mlp(fmt::format("{}.moe.expert{}", p, e), C);
      // each kept assignment's output times its gate, added into its token's row
      out.push_back(cost::elementwise(p + ".moe.combine", "combine", k * T * d, 2, 3, 1, eb));
    }
    out.push_back(cost::add(p + ".mlp.residual", T * d, eb));
    if (g.recompute == "full") {
      // Every block's forward runs again in backward; between steps a block keeps only its
      // input, and one block's activations are alive at a time (while it is re-run): counted
      // at layer 0.
      for (size_t j = first; j < out.size(); ++j) {
        out[j].bwd_input_flops += out[j].fwd_flops;
        if (i > 0) out[j].saved_bytes = 0;
      }
      out[first].saved_bytes += double(eb) * T * d;
    } else if (g.recompute == "selective") {
      // Only the attention core runs again; it keeps q, k and v (expanded to every head), not
      // the s x s scores and probabilities.
      for (size_t j = first; j < out.size(); ++j)
        if (out[j].op == "attention") {
          out[j].bwd_input_flops += out[j].fwd_flops;
          out[j].saved_bytes = double(eb) * 3 * T * d;
        }
    }
  }
  norm("final_norm");
  if (g.tied)  // the embedding's weight: no parameters of its own
    out.push_back(cost::linear_nobias("lm_head", T, g.d, g.vocab, eb, true, /*tied=*/true));
  else
    linear("lm_head", T, g.d, g.vocab, false);
  out.back().keep_half_in_fp8 = true;
  out.push_back(cost::softmax_xent("loss", T, g.vocab, eb));
  // token ids and next-token targets (int64), the additive causal mask, and RoPE's cos and sin
  m.input_bytes = 8.0 * 2 * T + double(eb) * double(g.seq) * double(g.seq) +
                  (g.rope ? 2.0 * double(eb) * double(g.seq) * double(g.head_dim) : 0.0);
  m.model_flops = gpt_model_flops(g);
  m.memory_references = activation_references(c, g, out, eb);
  m.workers = c.get_int("workers");
  m.zero = int(c.get_int("zero"));
  return m;
}

FamilySchema gpt_schema() {
  FamilySchema s{
      "gpt",
      "decoder-only transformer: pre-norm blocks, grouped-query causal self-attention, GELU or "
      "SwiGLU feed-forward or a top-k mixture of experts, learned or rotary positions",
      {{"layers", "transformer blocks", "12", 1, 1024, {}},
       {"d_model", "model width (hidden size)", "768", 2, 1 << 17, {}},
       {"heads", "query heads (divide d_model)", "12", 1, 4096, {}},
       {"kv_heads",
        "key/value heads, grouped-query attention (divide heads; = heads: multi-head, 1: "
        "multi-query; 0: = heads)",
        "0",
        0,
        4096,
        {}},
       {"ff",
        "feed-forward hidden width (0: 4 x d_model for gelu, 8/3 x d_model rounded up to a "
        "multiple of 64 for swiglu)",
        "0",
        0,
        1 << 20,
        {}},
       {"act", "feed-forward activation", "gelu", 0, 0, {"gelu", "swiglu"}},
       {"norm", "normalization before each block", "layernorm", 0, 0, {"layernorm", "rmsnorm"}},
       {"pos", "positions: a learned table or rotary (RoPE)", "learned", 0, 0, {"learned", "rope"}},
       {"positions", "rows of the learned position table (0: = seq)", "0", 0, 1 << 20, {}},
       {"seq", "sequence length in tokens", "1024", 1, 1 << 20, {}},
       {"vocab", "vocabulary size", "50257", 2, 1 << 22, {}},
       {"tied", "output projection tied to the token embedding", "on", 0, 0, {"on", "off"}},
       {"bias", "biases in the linear layers (GPT-2: on; LLaMA: off)", "on", 0, 0, {"on", "off"}},
       {"experts", "feed-forward experts per layer (1: dense)", "1", 1, 4096, {}},
       {"top_k", "experts each token is routed to", "1", 1, 64, {}},
       real_param("capacity",
                  "expert capacity factor: slots per expert = capacity x tokens x top_k / "
                  "experts; assignments beyond are dropped",
                  "1.25", 0.01, 64),
       real_param("aux_loss", "weight of the load-balancing loss (Switch Transformer)", "0.01", 0,
                  100),
       {"recompute",
        "activation recomputation: none, selective (the attention core, Korthikanti et al. "
        "2022) or full (every block re-run in backward)",
        "none",
        0,
        0,
        {"none", "selective", "full"}},
       {"zero",
        "ZeRO stage with workers > 1: 0 plain data parallelism, 1 optimizer state sharded (run); "
        "2 and 3 also gradients, weights (predicted by memory and cost, refused by run)",
        "0",
        0,
        3,
        {}}},
      "gpt:layers=2,d_model=128,heads=4,kv_heads=2,act=swiglu,norm=rmsnorm,pos=rope,seq=64,"
      "vocab=512,batch=4"};
  s.throughput_unit = "tokens";
  for (auto& p : common_params(8, "adamw")) s.params.push_back(p);
  // Small, and every branch a contract clause can see: GQA, SwiGLU, RMSNorm, RoPE, an untied
  // head and a mixture of experts; gpt_test.cc checks the other branches.
  s.contract =
      "gpt:layers=2,d_model=32,heads=4,kv_heads=2,act=swiglu,norm=rmsnorm,pos=rope,seq=8,"
      "vocab=50,tied=off,bias=off,experts=4,top_k=2,batch=2";
  s.finalize = finalize_gpt;
  return s;
}

const bool registered = [] {
  register_family_schema(gpt_schema());
  register_cost("gpt", gpt_cost);
  // Published models as gpt configs; their parameter counts are checked in tests/gpt_test.cc.
  register_named_config(
      {"gpt2-small",
       "gpt:layers=12,d_model=768,heads=12,act=gelu,norm=layernorm,pos=learned,positions=1024,"
       "seq=1024,vocab=50257,tied=on,bias=on,batch=8",
       "GPT-2 small (Radford et al. 2019): 12 layers, d_model 768, 12 heads, 1024 learned "
       "positions, tied embeddings, 124,439,808 parameters",
       "OpenAI GPT-2 (huggingface.co/openai-community/gpt2, '124M parameters')"});
  register_named_config(
      {"tinyllama-1.1b",
       "gpt:layers=22,d_model=2048,heads=32,kv_heads=4,ff=5632,act=swiglu,norm=rmsnorm,pos=rope,"
       "seq=2048,vocab=32000,tied=off,bias=off,batch=1",
       "TinyLlama 1.1B (Zhang et al. 2024): 22 layers, d_model 2048, 32 heads, 4 key/value "
       "heads, SwiGLU 5632, RoPE, RMSNorm, untied, 1,100,048,384 parameters",
       "TinyLlama: An Open-Source Small Language Model, arXiv:2401.02385 ('1.1B')"});
  register_named_config(
      {"gpt-moe-small",
       "gpt:layers=4,d_model=256,heads=8,kv_heads=2,act=swiglu,norm=rmsnorm,pos=rope,seq=256,"
       "vocab=8192,tied=off,bias=off,experts=8,top_k=2,batch=4",
       "a small mixture of experts for sweeps: 8 SwiGLU experts per layer, top-2 routing", ""});
  return true;
}();

}  // namespace
}  // namespace tb
