// The gpt family (cost/gpt.cc has its schema): a decoder-only transformer as GPT-2 and LLaMA
// build it. Pre-norm blocks; causal self-attention with grouped-query heads; a GELU or SwiGLU
// feed-forward, or a token-choice top-k mixture of experts with a capacity per expert (GShard,
// Switch Transformer); learned or rotary positions; next-token cross-entropy. LibTorch 1.13
// has no fused attention and no RMSNorm, so both are composed here, every matrix product
// through model/activation_point.h. No dropout: today's pre-training runs without it.
#include "cost/gpt.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "model/activation_point.h"
#include "model/phase.h"
#include "model/workload.h"

namespace tb {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Recomputation: `fn` runs in the forward pass without keeping anything but its inputs, and
// again, with autograd, in the backward pass, whose gradients then flow through the re-run
// graph (the re-entrant form of torch.utils.checkpoint; LibTorch 1.13 has no checkpoint API).
// The parameters `fn` reads get their gradients from that inner backward. The re-run is
// identical: nothing in `fn` draws random numbers (no dropout; routing is top-k) except the
// stochastic rounding of emulated formats (numerics=), which it replays from where the first
// run's streams stood, through the same points (model/activation_point.h's PointsReplay).
struct Segment {
  std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)> fn;
  PointsReplay points;  // captured as the forward pass runs it
};

struct Recompute : torch::autograd::Function<Recompute> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::TensorList inputs, int64_t segment) {
    ctx->saved_data["segment"] = segment;
    ctx->save_for_backward(inputs.vec());
    torch::NoGradGuard no_graph;
    std::vector<torch::Tensor> detached;
    for (const auto& t : inputs) detached.push_back(t.detach());
    auto& seg = *reinterpret_cast<Segment*>(segment);
    seg.points = PointsReplay();
    return seg.fn(detached);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& seg = *reinterpret_cast<const Segment*>(ctx->saved_data["segment"].toInt());
    std::vector<torch::Tensor> inputs;
    for (const auto& t : ctx->get_saved_variables())
      inputs.push_back(t.detach().requires_grad_(t.requires_grad()));
    std::vector<torch::Tensor> outputs, output_grads;
    {
      torch::AutoGradMode with_graph(true);
      const PointsReplay::Scope replay(seg.points);
      const auto again = seg.fn(inputs);
      for (size_t i = 0; i < again.size(); ++i)
        if (again[i].requires_grad() && grads[i].defined()) {
          outputs.push_back(again[i]);
          output_grads.push_back(grads[i]);
        }
    }
    if (!outputs.empty()) torch::autograd::backward(outputs, output_grads);
    torch::autograd::variable_list out;
    for (const auto& t : inputs) out.push_back(t.requires_grad() ? t.grad() : torch::Tensor());
    out.emplace_back();  // for `segment`
    return out;
  }
};

std::vector<torch::Tensor> recompute(Segment& segment, const std::vector<torch::Tensor>& in) {
  return Recompute::apply(at::TensorList(in), reinterpret_cast<int64_t>(&segment));
}

struct RMSNormImpl : nn::Module {
  explicit RMSNormImpl(int64_t d) { weight = register_parameter("weight", torch::ones({d})); }
  // In fp32 whatever the dtype, as LLaMA does: the mean of squares loses too much in bf16.
  torch::Tensor forward(const torch::Tensor& x) {
    const auto xf = x.to(torch::kFloat32);
    const auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + 1e-6);
    return y.to(x.scalar_type()) * weight;
  }
  torch::Tensor weight;
};
TORCH_MODULE(RMSNorm);

// LayerNorm or RMSNorm, chosen by the config.
struct NormImpl : nn::Module {
  NormImpl(int64_t d, bool rms) {
    if (rms)
      rms_ = register_module("rms", RMSNorm(d));
    else
      ln_ = register_module("ln", nn::LayerNorm(nn::LayerNormOptions({d})));
  }
  torch::Tensor forward(const torch::Tensor& x) { return rms_ ? rms_(x) : ln_(x); }
  RMSNorm rms_{nullptr};
  nn::LayerNorm ln_{nullptr};
};
TORCH_MODULE(Norm);

nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return nn::Linear(nn::LinearOptions(in, out).bias(bias));
}

// One feed-forward block: fc1, GELU, fc2; or SwiGLU's down(silu(gate(x)) * up(x)).
struct MlpImpl : nn::Module {
  MlpImpl(const GptShape& g) : swiglu(g.swiglu) {
    if (swiglu) {
      gate = register_module("gate", linear(g.d, g.ff, g.bias));
      up = register_module("up", linear(g.d, g.ff, g.bias));
      down = register_module("down", linear(g.ff, g.d, g.bias));
    } else {
      fc1 = register_module("fc1", linear(g.d, g.ff, g.bias));
      fc2 = register_module("fc2", linear(g.ff, g.d, g.bias));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    if (swiglu) return layer_op(down, F::silu(layer_op(gate, x)) * layer_op(up, x));
    return layer_op(fc2, F::gelu(layer_op(fc1, x), F::GELUFuncOptions().approximate("tanh")));
  }
  bool swiglu;
  nn::Linear gate{nullptr}, up{nullptr}, down{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// Token-choice top-k routing to experts of a fixed capacity. Every expert runs on exactly its
// capacity's rows (empty slots are zeros), so the work is what the cost description counts.
struct MoeImpl : nn::Module {
  MoeImpl(const GptShape& g) : g_(g) {
    router = register_module("router", linear(g.d, g.experts, false));
    experts = register_module("experts", nn::ModuleList());
    for (int64_t e = 0; e < g.experts; ++e) experts->push_back(Mlp(g));
  }
  // h [B, s, d] -> the experts' output [B, s, d] and this layer's load-balancing loss.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& h) {
    const int64_t T = h.size(0) * h.size(1), E = g_.experts, k = g_.top_k, d = g_.d;
    GptShape at = g_;
    at.batch = h.size(0), at.seq = h.size(1);
    const int64_t C = at.expert_capacity();
    const auto x = h.reshape({T, d});
    const auto probs = torch::softmax(layer_op(router, x).to(torch::kFloat32), -1);  // [T, E]
    auto [top_p, top_e] = probs.topk(k, -1);                                         // [T, k]
    // Switch Transformer (k = 1) uses the probability itself; top-k renormalizes (GShard).
    const auto gates = k > 1 ? top_p / top_p.sum(-1, true) : top_p;
    // Assignments in priority order: every token's first choice, then every second choice.
    const auto expert = top_e.t().reshape({-1});                        // [k T]
    const auto token = torch::arange(T, expert.options()).repeat({k});  // [k T]
    const auto onehot = F::one_hot(expert, E);                          // [k T, E]
    const auto position = (onehot.cumsum(0) - 1).gather(1, expert.unsqueeze(1)).squeeze(1);
    const auto kept = (position < C).nonzero().squeeze(1);
    const auto slot = expert.index_select(0, kept) * C + position.index_select(0, kept);
    const auto from = token.index_select(0, kept);
    const auto dispatched =
        torch::zeros({E * C, d}, x.options()).index_copy(0, slot, x.index_select(0, from));
    std::vector<torch::Tensor> outs;
    for (int64_t e = 0; e < E; ++e)
      outs.push_back(experts[e]->as<MlpImpl>()->forward(dispatched.slice(0, e * C, (e + 1) * C)));
    const auto gate = gates.t().reshape({-1}).index_select(0, kept).to(x.scalar_type());
    const auto y =
        torch::zeros({T, d}, x.options())
            .index_add(0, from, torch::cat(outs).index_select(0, slot) * gate.unsqueeze(1));
    // Switch Transformer's balance loss: E x sum over experts of (share of assignments it was
    // chosen for, before capacity) x (mean router probability).
    const auto share = onehot.sum(0).to(torch::kFloat32) / double(k * T);
    const auto aux = double(E) * (share * probs.mean(0)).sum();
    return {y.view(h.sizes()), aux};
  }
  GptShape g_;
  nn::Linear router{nullptr};
  nn::ModuleList experts{nullptr};
};
TORCH_MODULE(Moe);

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

struct BlockImpl : nn::Module {
  BlockImpl(const GptShape& g, const std::string& recompute) : recompute_(recompute), g_(g) {
    norm1 = register_module("norm1", Norm(g.d, g.rmsnorm));
    qkv = register_module("qkv", linear(g.d, g.d + 2 * g.kv_width(), g.bias));
    out = register_module("out", linear(g.d, g.d, g.bias));
    norm2 = register_module("norm2", Norm(g.d, g.rmsnorm));
    if (g.moe())
      moe = register_module("moe", Moe(g));
    else
      mlp = register_module("mlp", Mlp(g));
  }
  // x [B, s, d]; mask [s, s] additive; cos, sin [s, head_dim] (RoPE) or undefined. Adds this
  // block's load-balancing loss to `aux`.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask, const torch::Tensor& cos,
                        const torch::Tensor& sin, torch::Tensor& aux) {
    if (recompute_ != "full") return block(x, mask, cos, sin, aux);
    // The segment lives in the block until the next step's forward replaces it: after this
    // step's backward has re-run it.
    segment_.fn = [this, mask, cos, sin](const std::vector<torch::Tensor>& in) {
      torch::Tensor balance;
      auto y = block(in[0], mask, cos, sin, balance);
      return balance.defined() ? std::vector<torch::Tensor>{y, balance}
                               : std::vector<torch::Tensor>{y};
    };
    const auto out = recompute(segment_, {x});
    if (out.size() > 1) aux = aux.defined() ? aux + out[1] : out[1];
    return out[0];
  }
  torch::Tensor block(torch::Tensor x, const torch::Tensor& mask, const torch::Tensor& cos,
                      const torch::Tensor& sin, torch::Tensor& aux) {
    const int64_t B = x.size(0), s = x.size(1), H = g_.heads, KV = g_.kv_heads, hd = g_.head_dim;
    const auto normed = norm1(x);
    torch::Tensor q, k, v;
    {
      const PartScope part("projections");
      const auto proj = layer_op(qkv, normed);
      q = proj.slice(-1, 0, g_.d).view({B, s, H, hd}).transpose(1, 2);
      k = proj.slice(-1, g_.d, g_.d + g_.kv_width()).view({B, s, KV, hd}).transpose(1, 2);
      v = proj.slice(-1, g_.d + g_.kv_width()).view({B, s, KV, hd}).transpose(1, 2);
      if (cos.defined()) {
        q = q * cos + rotate_half(q) * sin;
        k = k * cos + rotate_half(k) * sin;
      }
      if (KV < H) {
        k = k.repeat_interleave(H / KV, 1);
        v = v.repeat_interleave(H / KV, 1);
      }
    }
    torch::Tensor context;
    if (recompute_ == "selective") {
      // Korthikanti et al. 2022: only the attention core (scores, softmax, their product with
      // v) is recomputed; its inputs q, k, v are kept.
      attention_.fn = [mask](const std::vector<torch::Tensor>& in) {
        return std::vector<torch::Tensor>{attention_core(in[0], in[1], in[2], mask)};
      };
      context = recompute(attention_, {q, k, v})[0];
    } else {
      context = attention_core(q, k, v, mask);
    }
    {
      const PartScope part("projections");
      x = x + layer_op(out, context.transpose(1, 2).reshape({B, s, g_.d}));
    }
    const auto h = norm2(x);
    torch::Tensor y;
    {
      const PartScope part("mlp");
      if (moe) {
        auto [experts_out, balance] = moe(h);
        y = experts_out;
        aux = aux.defined() ? aux + balance : balance;
      } else {
        y = mlp(h);
      }
    }
    return x + y;
  }
  // The queries' scaling, the scores with the causal mask, softmax, and their product with v.
  static torch::Tensor attention_core(torch::Tensor q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& mask) {
    const PartScope part("attention_scores");
    q = q * (1 / std::sqrt(double(q.size(-1))));
    const auto scores = product_op(q, k.transpose(-2, -1)) + mask;  // [B, H, s, s]
    return product_op(torch::softmax(scores, -1), v);               // [B, H, s, hd]
  }
  std::string recompute_;
  Segment segment_, attention_;
  GptShape g_;
  Norm norm1{nullptr}, norm2{nullptr};
  nn::Linear qkv{nullptr}, out{nullptr};
  Mlp mlp{nullptr};
  Moe moe{nullptr};
};
TORCH_MODULE(Block);

struct GptNetImpl : nn::Module {
  GptNetImpl(const GptShape& g, const std::string& recompute) : g_(g) {
    embed = register_module("embed", nn::Embedding(g.vocab, g.d));
    if (!g.rope) pos_embed = register_module("pos_embed", nn::Embedding(g.positions, g.d));
    layers = register_module("layers", nn::ModuleList());
    for (int64_t i = 0; i < g.layers; ++i) layers->push_back(Block(g, recompute));
    final_norm = register_module("final_norm", Norm(g.d, g.rmsnorm));
    if (!g.tied) lm_head = register_module("lm_head", linear(g.d, g.vocab, false));
    initialize();
  }
  // GPT-2's initialization, as Megatron-LM's init_method_std (0.02) and scaled init for the
  // projections that write into the residual stream (0.02 / sqrt(2 layers)); zero biases.
  // LibTorch's defaults (a token embedding of N(0, 1), tied to the output) start the loss near
  // 15 nats instead of ln(vocab), which the language task's iterations would pay for.
  void initialize() {
    torch::NoGradGuard no_grad;
    const double residual = 0.02 / std::sqrt(2.0 * double(g_.layers));
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor& p = item.value();
      const auto ends_with = [&](const std::string& tail) {
        return name.size() >= tail.size() &&
               name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (p.dim() < 2) {
        if (ends_with(".bias")) p.zero_();  // norms keep their unit weights
      } else {
        const bool writes_residual =
            ends_with(".out.weight") || ends_with(".fc2.weight") || ends_with(".down.weight");
        p.normal_(0, writes_residual ? residual : 0.02);
      }
    }
  }
  // tokens [B, s] -> logits [B, s, vocab] and the summed load-balancing loss (undefined when
  // dense).
  std::pair<torch::Tensor, torch::Tensor> forward(const std::vector<torch::Tensor>& in) {
    const auto& tokens = in[0];
    const auto& mask = in[1];
    const torch::Tensor cos = g_.rope ? in[2] : torch::Tensor(),
                        sin = g_.rope ? in[3] : torch::Tensor();
    auto x = embed(tokens);
    if (!g_.rope) x = x + pos_embed(torch::arange(tokens.size(1), tokens.options()));
    torch::Tensor aux;
    for (const auto& m : *layers) x = m->as<BlockImpl>()->forward(x, mask, cos, sin, aux);
    const auto h = final_norm(x);
    const PartScope part("logits");
    auto logits = g_.tied ? linear_op(h, embed->weight) : layer_op(lm_head, h);
    return {activation_point(logits), aux};
  }
  GptShape g_;
  nn::Embedding embed{nullptr}, pos_embed{nullptr};
  nn::ModuleList layers{nullptr};
  Norm final_norm{nullptr};
  nn::Linear lm_head{nullptr};
};
TORCH_MODULE(GptNet);

class GptWorkload : public Workload {
 public:
  explicit GptWorkload(const Config& c) : g_(gpt_shape(c)) {
    net_ = GptNet(g_, c.get("recompute"));
  }
  torch::nn::Module& module() override { return *net_; }

  // Random token ids (the step's cost does not depend on them), their next tokens as targets,
  // and the mask and rotary tables, all made once outside the timed steps.
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    const int64_t B = g_.batch, s = g_.seq;
    const auto ids = torch::randint(0, g_.vocab, {B, s + 1}, torch::kLong);
    std::vector<torch::Tensor> inputs = {
        ids.slice(1, 0, s).contiguous().to(device),
        torch::full({s, s}, -std::numeric_limits<float>::infinity()).triu(1).to(dtype).to(device)};
    if (g_.rope) {
      const int64_t hd = g_.head_dim;
      const auto inv_freq =
          torch::pow(10000.0, -torch::arange(0, hd, 2, torch::kFloat64) / double(hd));
      const auto angles = torch::outer(torch::arange(s, torch::kFloat64), inv_freq);
      const auto both = torch::cat({angles, angles}, -1);  // [s, hd], as rotate_half pairs them
      inputs.push_back(both.cos().to(dtype).to(device));
      inputs.push_back(both.sin().to(dtype).to(device));
    }
    return {inputs, ids.slice(1, 1, s + 1).reshape({-1}).to(device)};
  }
  torch::Tensor loss(const Batch& b) override {
    auto [logits, aux] = net_->forward(b.inputs);
    torch::Tensor loss;
    {
      const PartScope part("logits");
      loss = F::cross_entropy(logits.reshape({-1, g_.vocab}).to(torch::kFloat32), b.target);
    }
    if (aux.defined() && g_.aux_loss > 0) loss = loss + g_.aux_loss * aux;
    return loss;
  }
  // Every position's next-token logits, [B s, vocab] in fp32, to score held-out text with.
  torch::Tensor logits(const Batch& b) override {
    return net_->forward(b.inputs).first.reshape({-1, g_.vocab}).to(torch::kFloat32);
  }
  int64_t examples_per_step() const override { return g_.batch; }
  double units_per_step() const override { return double(g_.tokens()); }
  bool has_activation_points() const override { return true; }

 private:
  GptShape g_;
  GptNet net_{nullptr};
};

const bool gpt_registered =
    (register_builder("gpt", [](const Config& c) { return std::make_unique<GptWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
