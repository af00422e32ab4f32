// Seq2Seq (TBD: NMT / Sockeye on IWSLT15 En-Vi): the TensorFlow NMT tutorial's IWSLT15
// setting, which TBD's NMT runs: a bidirectional LSTM encoder (layers/2 bidirectional
// layers of `hidden` units per direction), a `layers`-deep LSTM decoder of `hidden` units
// initialised from the encoder's final states, scaled Luong attention with attention
// output (Luong's input feeding: the previous attention vector is fed to the next step),
// dropout 0.2 on every cell input, embeddings of `hidden` units, no output bias,
// teacher forcing and cross-entropy ignoring padding. With layers=2 that is TBD's
// "5 layers": 2 encoder directions, 2 decoder layers, 1 attention layer.
#include <fmt/format.h>

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
constexpr double kDropout = 0.2;

struct Seq2SeqNetImpl : nn::Module {
  Seq2SeqNetImpl(int64_t layers, int64_t hidden, int64_t src_vocab, int64_t tgt_vocab)
      : layers(layers), hidden(hidden), enc_layers(std::max<int64_t>(1, layers / 2)) {
    src_embed = register_module("src_embed", nn::Embedding(src_vocab, hidden));
    tgt_embed = register_module("tgt_embed", nn::Embedding(tgt_vocab, hidden));
    encoder = register_module("encoder", nn::LSTM(nn::LSTMOptions(hidden, hidden)
                                                      .num_layers(enc_layers)
                                                      .bidirectional(true)
                                                      .dropout(enc_layers > 1 ? kDropout : 0.0)));
    for (int64_t i = 0; i < layers; ++i)
      decoder.push_back(register_module(fmt::format("decoder{}", i),
                                        nn::LSTMCell(i == 0 ? 2 * hidden : hidden, hidden)));
    memory_layer = register_module("memory_layer",
                                   nn::Linear(nn::LinearOptions(2 * hidden, hidden).bias(false)));
    attention_g = register_parameter("attention_g", torch::ones({1}));
    attention_layer = register_module(
        "attention_layer", nn::Linear(nn::LinearOptions(3 * hidden, hidden).bias(false)));
    output_layer = register_module("output_layer",
                                   nn::Linear(nn::LinearOptions(hidden, tgt_vocab).bias(false)));
  }

  // src [S, B], src lengths (CPU, longest first), src padding [B, S], decoder input [T, B]
  // -> logits [T * B, tgt_vocab].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                        const torch::Tensor& src_pad, const torch::Tensor& tgt_in) {
    const int64_t B = src.size(1), T = tgt_in.size(0);
    auto x =
        F::dropout(src_embed(src), F::DropoutFuncOptions().p(kDropout).training(is_training()));
    // Packed, so that padding neither costs work nor reaches the backward direction's state.
    auto [enc_out, enc_state] = recurrent_state_op(encoder, x, src_lengths);
    auto memory = enc_out.transpose(0, 1);       // [B, S, 2H]
    auto keys = layer_op(memory_layer, memory);  // [B, S, H]
    auto key_mask = src_pad.unsqueeze(1);        // [B, 1, S]

    // Decoder layer i starts from encoder state i (forward and backward directions
    // alternate), as TF NMT passes a bidirectional encoder's states on.
    std::vector<torch::Tensor> h(layers), c(layers);
    for (int64_t i = 0; i < layers; ++i) {
      if (i < 2 * enc_layers) {
        h[i] = enc_state.h[i];
        c[i] = enc_state.c[i];
      } else {
        h[i] = c[i] = torch::zeros({B, hidden}, memory.options());
      }
    }
    auto emb = tgt_embed(tgt_in);  // [T, B, H]
    auto attention = torch::zeros({B, hidden}, memory.options());
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < T; ++t) {
      auto input = torch::cat({emb[t], attention}, 1);
      for (int64_t i = 0; i < layers; ++i) {
        input = F::dropout(input, F::DropoutFuncOptions().p(kDropout).training(is_training()));
        const RecurrentState s = lstm_cell_op(decoder[i], input, {h[i], c[i]});
        h[i] = s.h;
        c[i] = s.c;
        input = h[i];
      }
      // Scaled Luong: score = g * h . (W_m memory), softmax over the unpadded source.
      auto scores = product_op(h[layers - 1].unsqueeze(1), keys.transpose(1, 2)) * attention_g;
      scores = scores.masked_fill(key_mask, -std::numeric_limits<float>::infinity());
      auto weights = torch::softmax(scores, 2);               // [B, 1, S]
      auto context = product_op(weights, memory).squeeze(1);  // [B, 2H]
      attention = layer_op(attention_layer, torch::cat({h[layers - 1], context}, 1));
      outputs.push_back(attention);
    }
    auto out = torch::stack(outputs);  // [T, B, H]
    return activation_point(layer_op(output_layer, out.reshape({T * B, hidden})));
  }

  int64_t layers, hidden, enc_layers;
  nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  nn::LSTM encoder{nullptr};
  std::vector<nn::LSTMCell> decoder;
  nn::Linear memory_layer{nullptr}, attention_layer{nullptr}, output_layer{nullptr};
  torch::Tensor attention_g;
};
TORCH_MODULE(Seq2SeqNet);

class Seq2SeqWorkload : public Workload {
 public:
  explicit Seq2SeqWorkload(const Config& c)
      : net_(c.get_int("layers"), c.get_int("hidden"), c.get_int("src_vocab"),
             c.get_int("tgt_vocab")),
        batch_(c.get_int("batch")),
        min_len_(c.get_int("min_len")),
        max_len_(c.get_int("max_len")),
        src_vocab_(c.get_int("src_vocab")),
        tgt_vocab_(c.get_int("tgt_vocab")) {
    if (min_len_ > max_len_)
      throw UsageError(fmt::format("seq2seq: min_len={} exceeds max_len={}", min_len_, max_len_));
  }
  torch::nn::Module& module() override { return *net_; }

  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    const int64_t B = batch_, L = max_len_;
    auto ids = torch::TensorOptions().dtype(torch::kLong);
    auto src = torch::full({L, B}, kPad, ids), tgt_in = torch::full({L, B}, kPad, ids),
         tgt_out = torch::full({L, B}, kPad, ids), lengths = torch::empty({B}, ids);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = spread_length(b, B, min_len_, max_len_);
      lengths[b] = n;
      src.index_put_({torch::indexing::Slice(0, n), b},
                     torch::randint(kFirstWord, src_vocab_, {n}, ids));
      auto words = torch::randint(kFirstWord, tgt_vocab_, {n}, ids);
      words[n - 1] = kEos;
      tgt_out.index_put_({torch::indexing::Slice(0, n), b}, words);
      tgt_in[0][b] = kBos;
      if (n > 1) tgt_in.index_put_({torch::indexing::Slice(1, n), b}, words.slice(0, 0, n - 1));
    }
    auto src_pad = src.eq(kPad).t().contiguous();
    // Lengths stay on the CPU: packing reads them there.
    return {{src.to(device), lengths, src_pad.to(device), tgt_in.to(device)},
            tgt_out.reshape({-1}).to(device)};
  }
  torch::Tensor loss(const Batch& b) override {
    auto logits = net_->forward(b.inputs[0], b.inputs[1], b.inputs[2], b.inputs[3]);
    return F::cross_entropy(logits.to(torch::kFloat32), b.target,
                            F::CrossEntropyFuncOptions().ignore_index(kPad));
  }
  int64_t examples_per_step() const override { return batch_; }
  bool has_activation_points() const override { return true; }
  double units_per_step() const override {
    return double(spread_length_sum(batch_, min_len_, max_len_));
  }

 private:
  Seq2SeqNet net_;
  int64_t batch_, min_len_, max_len_, src_vocab_, tgt_vocab_;
};

const bool seq2seq_registered =
    (register_builder("seq2seq",
                      [](const Config& c) { return std::make_unique<Seq2SeqWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
