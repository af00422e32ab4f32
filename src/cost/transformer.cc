// Schema and cost description of the transformer family (model/transformer.cc). Every sentence is
// computed at the padded length `seq` (the batch's longest sentence is always `seq` long),
// so the work below is the padded work; the throughput unit counts only real target tokens.
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost transformer_cost(const Config& c, int64_t eb) {
  const int64_t B = c.get_int("batch"), N = c.get_int("layers"), d = c.get_int("d_model"),
                h = c.get_int("heads"), ff = c.get_int("ff"), V = c.get_int("vocab"),
                L = c.get_int("seq");
  const double rows = double(B) * L;  // per side: source and target are both padded to L
  ModelCost m;
  auto& out = m.layers;
  out.push_back(cost::embedding("embed", 2 * rows, V, d, eb));
  // scale by sqrt(d), add the position, dropout (its mask kept)
  out.push_back(
      cost::elementwise("embed.scale_position_dropout", "elementwise", 2 * rows * d, 3, 2, 1, eb));
  // Residual block tail: dropout, residual add, LayerNorm.
  auto tail = [&](const std::string& p) {
    out.push_back(cost::elementwise(p + ".dropout", "dropout", rows * d, 1, 1, 1, eb));
    out.push_back(cost::add(p + ".add", rows * d, eb));
    out.push_back(cost::layernorm(p + ".norm", rows, d, eb));
  };
  auto feed_forward = [&](const std::string& p) {
    out.push_back(cost::linear(p + ".linear1", rows, d, ff, eb, true));
    out.push_back(cost::relu(p + ".relu", rows * ff, eb));
    out.push_back(cost::elementwise(p + ".dropout1", "dropout", rows * ff, 1, 1, 1, eb));
    out.push_back(cost::linear(p + ".linear2", rows, ff, d, eb, true));
    tail(p);
  };
  for (int64_t i = 0; i < N; ++i) {
    const std::string p = fmt::format("encoder{}", i);
    out.push_back(cost::linear(p + ".self_attn.in_proj", rows, d, 3 * d, eb, true));
    // key padding mask: 1 FLOP per score
    out.push_back(cost::attention(p + ".self_attn", B, h, L, L, d, d, 1, true, true, eb));
    out.push_back(cost::linear(p + ".self_attn.out_proj", rows, d, d, eb, true));
    tail(p + ".self_attn");
    feed_forward(p + ".ff");
  }
  out.push_back(cost::layernorm("encoder.norm", rows, d, eb));
  for (int64_t i = 0; i < N; ++i) {
    const std::string p = fmt::format("decoder{}", i);
    out.push_back(cost::linear(p + ".self_attn.in_proj", rows, d, 3 * d, eb, true));
    // causal mask added and key padding filled: 2 FLOPs per score
    out.push_back(cost::attention(p + ".self_attn", B, h, L, L, d, d, 2, true, true, eb));
    out.push_back(cost::linear(p + ".self_attn.out_proj", rows, d, d, eb, true));
    tail(p + ".self_attn");
    // Cross-attention: queries from the decoder, keys and values from the encoder output
    // (one in_proj of 3d x d, split as LibTorch does).
    out.push_back(cost::linear(p + ".cross_attn.q_proj", rows, d, d, eb, true));
    out.push_back(cost::linear(p + ".cross_attn.kv_proj", rows, d, 2 * d, eb, true));
    out.push_back(cost::attention(p + ".cross_attn", B, h, L, L, d, d, 1, true, true, eb));
    out.push_back(cost::linear(p + ".cross_attn.out_proj", rows, d, d, eb, true));
    tail(p + ".cross_attn");
    feed_forward(p + ".ff");
  }
  out.push_back(cost::layernorm("decoder.norm", rows, d, eb));
  // Tied to the embedding: no parameters of its own; its weight gradient goes to the table.
  out.push_back(cost::linear_nobias("output", rows, d, V, eb, true, /*tied=*/true));
  out.back().keep_half_in_fp8 = true;
  // Label smoothing adds the mean of the log-probabilities over the vocabulary per row.
  auto loss = cost::softmax_xent("loss", rows, V, eb);
  loss.fwd_flops += rows * V;
  loss.bwd_input_flops += rows * V;
  out.push_back(loss);
  // token ids (source, decoder input, labels), padding masks (bool), causal mask
  m.input_bytes = 8.0 * 3 * rows + 2.0 * rows + double(eb) * L * L;
  return m;
}

FamilySchema transformer_schema() {
  FamilySchema s{"transformer",
                 "Transformer base (TBD, WMT-14 En-De): encoder-decoder self-attention, shared BPE "
                 "vocabulary, tied embeddings, label-smoothed cross-entropy",
                 {{"layers", "encoder layers = decoder layers", "6", 1, 64, {}},
                  {"d_model", "model width", "512", 2, 1 << 14, {}},
                  {"heads", "attention heads (divide d_model)", "8", 1, 256, {}},
                  {"ff", "feed-forward width", "2048", 1, 1 << 16, {}},
                  {"vocab", "shared source/target BPE vocabulary", "37000", 4, 1 << 22, {}},
                  {"seq",
                   "longest sentence in tokens (padded length); lengths spread over [seq/5, seq]",
                   "50",
                   1,
                   4096,
                   {}}},
                 "transformer:layers=2,d_model=64,heads=4,ff=128,vocab=1000,seq=20,batch=8"};
  s.task = "translation";
  s.throughput_unit = "tokens";
  s.batch_sweep = {16, 32, 64, 128};
  for (auto& p : common_params(16, "adam")) s.params.push_back(p);
  s.contract = "transformer:layers=1,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3";
  return s;
}

const bool registered = (register_family_schema(transformer_schema()),
                         register_cost("transformer", transformer_cost), true);

}  // namespace
}  // namespace tb
