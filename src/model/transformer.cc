// Transformer base (Vaswani et al. 2017) as TBD trains it on WMT-14 En-De: 6 + 6 layers,
// d_model 512, 8 heads, feed-forward 2048, dropout 0.1, one BPE vocabulary of 37000 shared
// by source and target, with the input embeddings shared and the output projection tied to
// them (scaled by sqrt(d_model) on the way in, as the paper), sinusoidal positions.
// LibTorch's nn::Transformer has the parameters of torch.nn.Transformer (final encoder and
// decoder LayerNorms included), so counts can be checked against Python one to one.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "base/errors.h"
#include "model/activation_point.h"
#include "model/workload.h"
#include "spec/lengths.h"

namespace tb {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kFirstWord = 3;

// Sinusoidal positions [length, 1, d]: sin on even features, cos on odd ones.
torch::Tensor sinusoid(int64_t length, int64_t d) {
  auto pos = torch::arange(length, torch::kFloat32).unsqueeze(1);
  auto rate = torch::exp(torch::arange(0, d, 2, torch::kFloat32) * (-std::log(10000.0) / d));
  auto pe = torch::zeros({length, d});
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, d, 2)},
                torch::sin(pos * rate));
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, d, 2)},
                torch::cos(pos * rate).slice(1, 0, d / 2));
  return pe.unsqueeze(1);
}

// LibTorch's multi-head attention (F::multi_head_attention_forward, no bias_k/v, no zero
// attention) written out with its products, projections and output layer through
// model/activation_point.h. q [L, B, d], kv [S, B, d].
torch::Tensor attention(nn::MultiheadAttentionImpl& a, const torch::Tensor& q_in,
                        const torch::Tensor& kv_in, bool self, const torch::Tensor& attn_mask,
                        const torch::Tensor& key_padding_mask) {
  const int64_t L = q_in.size(0), B = q_in.size(1), d = q_in.size(2);
  const int64_t heads = a.options.num_heads(), hd = d / heads;
  const auto& w = a.in_proj_weight;
  const auto& b = a.in_proj_bias;
  torch::Tensor q, k, v;
  if (self) {
    const auto qkv = linear_op(q_in, w, b).chunk(3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    q = linear_op(q_in, w.slice(0, 0, d), b.slice(0, 0, d));
    const auto kv = linear_op(kv_in, w.slice(0, d), b.slice(0, d)).chunk(2, -1);
    k = kv[0], v = kv[1];
  }
  q = q * (1 / std::sqrt(double(hd)));
  q = q.contiguous().view({L, B * heads, hd}).transpose(0, 1);
  k = k.contiguous().view({-1, B * heads, hd}).transpose(0, 1);
  v = v.contiguous().view({-1, B * heads, hd}).transpose(0, 1);
  const int64_t S = k.size(1);
  auto scores = product_op(q, k.transpose(1, 2));  // [B * heads, L, S]
  if (attn_mask.defined()) scores = scores + attn_mask.unsqueeze(0);
  if (key_padding_mask.defined())
    scores = scores.view({B, heads, L, S})
                 .masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2),
                              -std::numeric_limits<float>::infinity())
                 .view({B * heads, L, S});
  auto weights =
      F::dropout(F::softmax(scores, -1),
                 F::DropoutFuncOptions().p(a.options.dropout()).training(a.is_training()));
  auto out = product_op(weights, v).transpose(0, 1).contiguous().view({L, B, d});
  return layer_op(a.out_proj, out);
}

// nn::Transformer's forward (post-norm layers, final encoder and decoder norms, ReLU
// feed-forward) from its own modules, through the points.
torch::Tensor transformer_with_points(nn::TransformerImpl& core, const torch::Tensor& src,
                                      const torch::Tensor& tgt, const torch::Tensor& tgt_mask,
                                      const torch::Tensor& src_pad, const torch::Tensor& tgt_pad) {
  auto& encoder = *core.encoder.get<nn::TransformerEncoder>();
  auto& decoder = *core.decoder.get<nn::TransformerDecoder>();
  auto memory = src;
  for (const auto& m : *encoder.layers) {
    auto& l = *m->as<nn::TransformerEncoderLayer>();
    auto ret =
        l.norm1(memory + l.dropout1(attention(*l.self_attn, memory, memory, true, {}, src_pad)));
    auto ff = layer_op(l.linear2, l.dropout(relu_op(layer_op(l.linear1, ret))));
    memory = l.norm2(ret + l.dropout2(ff));
  }
  if (!encoder.norm.is_empty()) memory = encoder.norm.forward<torch::Tensor>(memory);
  auto out = tgt;
  for (const auto& m : *decoder.layers) {
    auto& l = *m->as<nn::TransformerDecoderLayer>();
    out = l.norm1(out + l.dropout1(attention(*l.self_attn, out, out, true, tgt_mask, tgt_pad)));
    out = l.norm2(out + l.dropout2(attention(*l.multihead_attn, out, memory, false, {}, src_pad)));
    auto ff = layer_op(l.linear2, l.dropout(relu_op(layer_op(l.linear1, out))));
    out = l.norm3(out + l.dropout3(ff));
  }
  if (!decoder.norm.is_empty()) out = decoder.norm.forward<torch::Tensor>(out);
  return out;
}

struct TransformerNetImpl : nn::Module {
  TransformerNetImpl(int64_t layers, int64_t d, int64_t heads, int64_t ff, int64_t vocab,
                     int64_t seq)
      : scale(std::sqrt(double(d))) {
    embed = register_module("embed", nn::Embedding(vocab, d));
    core = register_module("transformer", nn::Transformer(nn::TransformerOptions(d, heads)
                                                              .num_encoder_layers(layers)
                                                              .num_decoder_layers(layers)
                                                              .dim_feedforward(ff)
                                                              .dropout(0.1)));
    dropout = register_module("dropout", nn::Dropout(0.1));
    positions = register_buffer("positions", sinusoid(seq, d));
  }
  // src [S, B], tgt [T, B] token ids -> logits [T, B, vocab].
  torch::Tensor forward(const std::vector<torch::Tensor>& in) {
    const auto &src = in[0], &tgt = in[1], &src_pad = in[2], &tgt_pad = in[3], &causal = in[4];
    auto s = dropout(embed(src) * scale + positions.slice(0, 0, src.size(0)));
    auto t = dropout(embed(tgt) * scale + positions.slice(0, 0, tgt.size(0)));
    // Emulation runs the same modules composed here, so that formats and operators reach
    // the attention products and projections nn::Transformer keeps inside.
    auto h = points_installed()
                 ? transformer_with_points(*core, s, t, causal, src_pad, tgt_pad)
                 : core->forward(s, t, /*src_mask=*/{}, causal, /*memory_mask=*/{}, src_pad,
                                 tgt_pad, /*memory_key_padding_mask=*/src_pad);
    return activation_point(linear_op(h, embed->weight));  // tied output projection, no bias
  }
  double scale;
  nn::Embedding embed{nullptr};
  nn::Transformer core{nullptr};
  nn::Dropout dropout{nullptr};
  torch::Tensor positions;
};
TORCH_MODULE(TransformerNet);

class TransformerWorkload : public Workload {
 public:
  explicit TransformerWorkload(const Config& c)
      : batch_(c.get_int("batch")), seq_(c.get_int("seq")), vocab_(c.get_int("vocab")) {
    const int64_t d = c.get_int("d_model"), heads = c.get_int("heads");
    if (d % heads != 0)
      throw UsageError(fmt::format("d_model={} is not a multiple of heads={}", c.get("d_model"),
                                   c.get("heads")));
    if (d % 2 != 0) throw UsageError("d_model=" + c.get("d_model") + " must be even (sinusoids)");
    net_ = TransformerNet(c.get_int("layers"), d, heads, c.get_int("ff"), vocab_, seq_);
  }
  torch::nn::Module& module() override { return *net_; }

  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    const int64_t B = batch_, L = seq_, lo = min_length(L);
    auto ids = torch::TensorOptions().dtype(torch::kLong);
    auto src = torch::full({L, B}, kPad, ids), tgt_in = torch::full({L, B}, kPad, ids),
         tgt_out = torch::full({L, B}, kPad, ids);
    for (int64_t b = 0; b < B; ++b) {
      // Source and target of a sentence pair are equally long; the target ends with EOS.
      const int64_t n = spread_length(b, B, lo, L);
      src.index_put_({torch::indexing::Slice(0, n), b},
                     torch::randint(kFirstWord, vocab_, {n}, ids));
      auto words = torch::randint(kFirstWord, vocab_, {n}, ids);
      words[n - 1] = kEos;
      tgt_out.index_put_({torch::indexing::Slice(0, n), b}, words);
      tgt_in[0][b] = kBos;
      if (n > 1) tgt_in.index_put_({torch::indexing::Slice(1, n), b}, words.slice(0, 0, n - 1));
    }
    auto src_pad = src.eq(kPad).t().contiguous(), tgt_pad = tgt_in.eq(kPad).t().contiguous();
    // Additive causal mask: -inf above the diagonal, in the model's dtype.
    auto causal = torch::full({L, L}, -std::numeric_limits<float>::infinity()).triu(1).to(dtype);
    return {{src.to(device), tgt_in.to(device), src_pad.to(device), tgt_pad.to(device),
             causal.to(device)},
            tgt_out.reshape({-1}).to(device)};
  }
  torch::Tensor loss(const Batch& b) override {
    auto logits = net_->forward(b.inputs);
    return F::cross_entropy(logits.reshape({-1, vocab_}).to(torch::kFloat32), b.target,
                            F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(0.1));
  }
  int64_t examples_per_step() const override { return batch_; }
  bool has_activation_points() const override { return true; }
  // Non-padding target tokens (the EOS included), as translation throughput is quoted.
  double units_per_step() const override {
    return double(spread_length_sum(batch_, min_length(seq_), seq_));
  }
  static int64_t min_length(int64_t seq) { return std::max<int64_t>(1, seq / 5); }

 private:
  TransformerNet net_{nullptr};
  int64_t batch_, seq_, vocab_;
};

const bool transformer_registered =
    (register_builder("transformer",
                      [](const Config& c) { return std::make_unique<TransformerWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
