// Schema and cost description of the seq2seq family (model/seq2seq.cc). The encoder runs on packed
// sequences, so its recurrent work is at the real source token count (the sentences'
// lengths are known exactly: spec/lengths.h); the decoder, attention and output layer run
// at the padded target length, as the model computes them.
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"
#include "spec/lengths.h"

namespace tb {
namespace {

ModelCost seq2seq_cost(const Config& c, int64_t eb) {
  const int64_t B = c.get_int("batch"), layers = c.get_int("layers"), H = c.get_int("hidden"),
                Vs = c.get_int("src_vocab"), Vt = c.get_int("tgt_vocab"), lo = c.get_int("min_len"),
                L = c.get_int("max_len");
  const int64_t enc_layers = std::max<int64_t>(1, layers / 2);
  const double rows = double(B) * L;
  const double real = double(spread_length_sum(B, lo, L)) / rows;  // packed share
  ModelCost m;
  auto& out = m.layers;
  out.push_back(cost::embedding("src_embed", rows, Vs, H, eb));
  out.push_back(cost::elementwise("src_embed.dropout", "dropout", rows * H, 1, 1, 1, eb));
  for (int64_t j = 0; j < enc_layers; ++j) {
    const int64_t in = j == 0 ? H : 2 * H;
    if (j > 0) {
      auto drop =
          cost::elementwise(fmt::format("encoder{}.dropout", j), "dropout", rows * in, 1, 1, 1, eb);
      cost::scale_to_packed(drop, real);
      out.push_back(drop);
    }
    for (const char* dir : {"fw", "bw"}) {
      auto l = cost::recurrent(fmt::format("encoder{}.{}", j, dir), "lstm", B, L, in, H, eb);
      cost::scale_to_packed(l, real);
      out.push_back(l);
    }
  }
  out.push_back(cost::linear_nobias("memory_layer", rows, 2 * H, H, eb, true));
  out.push_back(cost::embedding("tgt_embed", rows, Vt, H, eb));
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t in = i == 0 ? 2 * H : H;  // layer 0: embedding and previous attention
    out.push_back(
        cost::elementwise(fmt::format("decoder{}.dropout", i), "dropout", rows * in, 1, 1, 1, eb));
    out.push_back(cost::recurrent(fmt::format("decoder{}", i), "lstm", B, L, in, H, eb));
  }
  // Per target step: scores against the projected memory (H), context from the memory
  // (2H); the scale g and the padding mask are 2 FLOPs per score.
  auto att = cost::attention("attention", B, 1, L, L, H, 2 * H, 2, false, false, eb);
  att.params = 1;  // g
  out.push_back(att);
  out.push_back(cost::linear_nobias("attention_layer", rows, 3 * H, H, eb, true));
  out.push_back(cost::linear_nobias("output_layer", rows, H, Vt, eb, true));
  out.back().keep_half_in_fp8 = true;
  out.push_back(cost::softmax_xent("loss", rows, Vt, eb));
  // token ids (source, decoder input, labels), lengths, padding mask (bool)
  m.input_bytes = 8.0 * 3 * rows + 8.0 * B + rows;
  return m;
}

FamilySchema seq2seq_schema() {
  FamilySchema s{
      "seq2seq",
      "Seq2Seq / NMT (TBD, IWSLT15 En-Vi): bidirectional LSTM encoder, LSTM decoder with "
      "scaled Luong attention and input feeding, teacher forcing",
      {{"layers",
        "decoder LSTM layers (the encoder has layers/2 bidirectional ones)",
        "2",
        1,
        64,
        {}},
       {"hidden", "LSTM units = embedding size = attention size", "512", 1, 1 << 14, {}},
       {"src_vocab", "source vocabulary", "17188", 4, 1 << 22, {}},
       {"tgt_vocab", "target vocabulary", "17188", 4, 1 << 22, {}},
       {"min_len", "shortest sentence in tokens", "20", 1, 4096, {}},
       {"max_len", "longest sentence in tokens (padded length)", "30", 1, 4096, {}}},
      "seq2seq:layers=2,hidden=64,src_vocab=1000,tgt_vocab=1000,min_len=5,max_len=10,batch=8"};
  s.task = "translation";
  s.throughput_unit = "tokens";
  s.batch_sweep = {16, 32, 64, 128};
  for (auto& p : common_params(128, "sgd")) s.params.push_back(p);
  s.contract = "seq2seq:layers=2,hidden=8,src_vocab=20,tgt_vocab=30,min_len=2,max_len=5,batch=4";
  return s;
}

const bool registered =
    (register_family_schema(seq2seq_schema()), register_cost("seq2seq", seq2seq_cost), true);

}  // namespace
}  // namespace tb
