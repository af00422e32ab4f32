// Deep Speech 2 (Amodei et al. 2016) as TBD trains it (MXNet, LibriSpeech): two 2-D
// convolutions over the spectrogram (32 filters 41x11 stride 2x2, then 32 filters 21x11
// stride 2x1, frequency x time, each with BatchNorm and hardtanh(0, 20)), `rnn_layers`
// bidirectional GRU or ReLU-RNN layers of `hidden` units (TBD's MXNet deepspeech.cfg: 5
// bidirectional GRU layers of 1760 units), the two directions summed and each layer but the
// first preceded by sequence-wise BatchNorm (as deepspeech.pytorch and the paper), then
// BatchNorm and a fully-connected layer to 29 characters (blank, space, a-z, apostrophe)
// and CTC. Utterances are padded; the convolutions' padded frames are zeroed and the
// recurrent layers run on packed sequences, so padding does no recurrent work.
#include <fmt/format.h>

#include "base/errors.h"
#include "model/activation_point.h"
#include "model/workload.h"
#include "spec/lengths.h"

namespace tb {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

constexpr int64_t kFreqBins = 161;  // 20 ms windows, 10 ms hop, 16 kHz: 320-point FFT
constexpr int64_t kChars = 29;
constexpr int64_t kCharsPerSecond = 15;  // LibriSpeech read speech, about 15 characters/s

// Frames after the convolutions: time stride 2 with padding 5 on an 11-wide kernel.
int64_t frames_after_conv(int64_t frames) { return (frames - 1) / 2 + 1; }

// Transcript length of an utterance: its speaking rate, kept short enough for CTC (a
// path needs at least 2L+1 output frames when every label repeats).
int64_t transcript_length(int64_t frames) {
  const int64_t by_rate = frames * kCharsPerSecond / 100;
  return std::max<int64_t>(1, std::min(by_rate, (frames_after_conv(frames) - 1) / 2));
}

struct DeepSpeech2NetImpl : nn::Module {
  DeepSpeech2NetImpl(const std::string& rnn_type, int64_t rnn_layers, int64_t hidden)
      : hidden(hidden) {
    auto conv = [](int64_t in, int64_t kf, int64_t kt, int64_t sf, int64_t st) {
      return nn::Conv2d(nn::Conv2dOptions(in, 32, {kf, kt})
                            .stride({sf, st})
                            .padding(torch::ExpandingArray<2>({kf / 2, kt / 2}))
                            .bias(false));
    };
    conv1 = register_module("conv1", conv(1, 41, 11, 2, 2));
    bn1 = register_module("bn1", nn::BatchNorm2d(32));
    conv2 = register_module("conv2", conv(32, 21, 11, 2, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(32));
    const int64_t f1 = (kFreqBins + 2 * 20 - 41) / 2 + 1, f2 = (f1 + 2 * 10 - 21) / 2 + 1;
    int64_t in = 32 * f2;
    for (int64_t i = 0; i < rnn_layers; ++i) {
      if (i > 0)
        norms.push_back(register_module(fmt::format("rnn{}_bn", i), nn::BatchNorm1d(hidden)));
      if (rnn_type == "gru") {
        grus.push_back(register_module(fmt::format("rnn{}", i),
                                       nn::GRU(nn::GRUOptions(in, hidden).bidirectional(true))));
      } else {
        rnns.push_back(register_module(
            fmt::format("rnn{}", i),
            nn::RNN(nn::RNNOptions(in, hidden).nonlinearity(torch::kReLU).bidirectional(true))));
      }
      in = hidden;
    }
    fc_bn = register_module("fc_bn", nn::BatchNorm1d(hidden));
    fc = register_module("fc", nn::Linear(nn::LinearOptions(hidden, kChars).bias(false)));
  }

  // spectrogram [B, 1, 161, T], frame mask [B, 1, 1, T'] (1 on real frames after the
  // convolutions), lengths after the convolutions (CPU, longest first) -> log-probs [T', B, 29].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask,
                        const torch::Tensor& lengths) {
    auto y = clipped_relu_op(bn1(layer_op(conv1, x)), 20) * mask;
    y = clipped_relu_op(bn2(layer_op(conv2, y)), 20) * mask;
    const int64_t B = y.size(0), T = y.size(3);
    auto seq = y.reshape({B, -1, T}).permute({2, 0, 1}).contiguous();  // [T', B, 32 * 41]
    const size_t layers = grus.empty() ? rnns.size() : grus.size();
    for (size_t i = 0; i < layers; ++i) {
      if (i > 0) seq = norms[i - 1](seq.reshape({T * B, hidden})).reshape({T, B, hidden});
      // Packed sequences: padding does no recurrent work.
      auto both =
          grus.empty() ? recurrent_op(rnns[i], seq, lengths) : recurrent_op(grus[i], seq, lengths);
      seq = both.view({T, B, 2, hidden}).sum(2);  // the two directions summed
    }
    auto logits =
        activation_point(layer_op(fc, fc_bn(seq.reshape({T * B, hidden}))).reshape({T, B, kChars}));
    return torch::log_softmax(logits.to(torch::kFloat32), 2);
  }

  int64_t hidden;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  std::vector<nn::BatchNorm1d> norms;
  std::vector<nn::GRU> grus;
  std::vector<nn::RNN> rnns;
  nn::BatchNorm1d fc_bn{nullptr};
  nn::Linear fc{nullptr};
};
TORCH_MODULE(DeepSpeech2Net);

class DeepSpeech2Workload : public Workload {
 public:
  explicit DeepSpeech2Workload(const Config& c)
      : net_(c.get("rnn_type"), c.get_int("rnn_layers"), c.get_int("hidden")),
        batch_(c.get_int("batch")),
        min_frames_(c.get_int("min_frames")),
        max_frames_(c.get_int("max_frames")) {
    if (min_frames_ > max_frames_)
      throw UsageError(fmt::format("deepspeech2: min_frames={} exceeds max_frames={}", min_frames_,
                                   max_frames_));
  }
  torch::nn::Module& module() override { return *net_; }

  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    const int64_t B = batch_, T = max_frames_, T2 = frames_after_conv(T);
    auto ids = torch::TensorOptions().dtype(torch::kLong);
    // Log-spectrogram-like features: normalised, zero beyond each utterance's end.
    auto x = torch::randn({B, 1, kFreqBins, T});
    auto mask = torch::zeros({B, 1, 1, T2});
    auto in_lengths = torch::empty({B}, ids), label_lengths = torch::empty({B}, ids);
    int64_t longest_label = 1;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = spread_length(b, B, min_frames_, max_frames_);
      x.index_put_(
          {b, torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(n)}, 0);
      mask.index_put_({b, 0, 0, torch::indexing::Slice(0, frames_after_conv(n))}, 1);
      in_lengths[b] = frames_after_conv(n);
      label_lengths[b] = transcript_length(n);
      longest_label = std::max(longest_label, transcript_length(n));
    }
    // Characters 1..28; 0 is the CTC blank (and the padding of shorter transcripts).
    auto labels = torch::randint(1, kChars, {B, longest_label}, ids);
    for (int64_t b = 0; b < B; ++b)
      labels.index_put_({b, torch::indexing::Slice(label_lengths[b].item<int64_t>())}, 0);
    return {{x.to(device, dtype), mask.to(device, dtype), in_lengths, label_lengths},
            labels.to(device)};
  }
  torch::Tensor loss(const Batch& b) override {
    auto log_probs = net_->forward(b.inputs[0], b.inputs[1], b.inputs[2]);
    return F::ctc_loss(log_probs, b.target, b.inputs[2], b.inputs[3],
                       F::CTCLossFuncOptions().blank(0).zero_infinity(true));
  }
  int64_t examples_per_step() const override { return batch_; }
  bool has_activation_points() const override { return true; }
  // Seconds of audio (10 ms frames), padding left out.
  double units_per_step() const override {
    return double(spread_length_sum(batch_, min_frames_, max_frames_)) / 100.0;
  }

 private:
  DeepSpeech2Net net_;
  int64_t batch_, min_frames_, max_frames_;
};

const bool deepspeech2_registered =
    (register_builder("deepspeech2",
                      [](const Config& c) { return std::make_unique<DeepSpeech2Workload>(c); }),
     true);

}  // namespace
}  // namespace tb
