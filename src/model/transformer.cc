// Transformer base (Vaswani et al. 2017) as TBD trains it on WMT-14 En-De: 6 + 6 layers,
// d_model 512, 8 heads, feed-forward 2048, dropout 0.1, one BPE vocabulary of 37000 shared
// by source and target, with the input embeddings shared and the output projection tied to
// them (scaled by sqrt(d_model) on the way in, as the paper), sinusoidal positions.
// LibTorch's nn::Transformer has the parameters of torch.nn.Transformer (final encoder and
// decoder LayerNorms included), so counts can be checked against Python one to one.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "model/workload.h"
#include "spec/errors.h"
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
    auto h = core->forward(s, t, /*src_mask=*/{}, causal, /*memory_mask=*/{}, src_pad, tgt_pad,
                           /*memory_key_padding_mask=*/src_pad);
    return F::linear(h, embed->weight);  // tied output projection, no bias
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
  // Non-padding target tokens (the EOS included), as translation throughput is quoted.
  double units_per_step() const override {
    return double(spread_length_sum(batch_, min_length(seq_), seq_));
  }
  static int64_t min_length(int64_t seq) { return std::max<int64_t>(1, seq / 5); }

 private:
  TransformerNet net_{nullptr};
  int64_t batch_, seq_, vocab_;
};

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
  s.unit = "tokens";
  s.batch_sweep = {16, 32, 64, 128};
  for (auto& p : common_params(16, "adam")) s.params.push_back(p);
  return s;
}

const bool registered =
    (register_family(transformer_schema(),
                     [](const Config& c) { return std::make_unique<TransformerWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
