// Schema and cost description of the deepspeech2 family (model/deepspeech2.cc). The convolutions
// run over the padded spectrogram (padded frames included, as computed); the recurrent layers run
// on packed sequences, so their work is at the real frame count; CTC's lattice is at each
// utterance's real frames and transcript length. Lengths are exact (spec/lengths.h).
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"
#include "spec/lengths.h"

namespace tb {
namespace {

// Mirrors model/deepspeech2.cc: time stride 2 in the first convolution, 15 characters per
// second of audio, capped so that CTC always has a path.
int64_t frames_after_conv(int64_t frames) { return (frames - 1) / 2 + 1; }
int64_t transcript_length(int64_t frames) {
  return std::max<int64_t>(1, std::min(frames * 15 / 100, (frames_after_conv(frames) - 1) / 2));
}

ModelCost deepspeech2_cost(const Config& c, int64_t eb) {
  const int64_t B = c.get_int("batch"), layers = c.get_int("rnn_layers"), H = c.get_int("hidden"),
                lo = c.get_int("min_frames"), T = c.get_int("max_frames");
  const std::string cell = c.get("rnn_type");
  const int64_t F0 = 161, F1 = (F0 + 2 * 20 - 41) / 2 + 1, F2 = (F1 + 2 * 10 - 21) / 2 + 1;
  const int64_t T1 = frames_after_conv(T), classes = 29;
  double real_frames = 0, lattice = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = spread_length(b, B, lo, T), t = frames_after_conv(n);
    real_frames += t;
    lattice += double(t) * (2 * transcript_length(n) + 1);
  }
  const double rows = double(B) * T1, real = real_frames / rows;
  ModelCost m;
  auto& out = m.layers;
  // Padding kh/2 x kw/2, no bias; BN follows and keeps the output.
  auto conv = [&](const char* name, const cost::ConvGeometry& g, bool input_grad) {
    out.push_back(cost::conv(name, g, eb, input_grad));
    out.back().saved_bytes = out.back().output_bytes;
  };
  conv("conv1", {B, 1, F0, T, 32, 41, 11, 2, 2, 20, 5, 1, false}, false);
  out.push_back(cost::batchnorm("bn1", B, 32, F1 * T1, eb));
  out.push_back(cost::elementwise("hardtanh1", "hardtanh", double(B) * 32 * F1 * T1, 2, 2, 0, eb));
  out.push_back(cost::elementwise("mask1", "mul", double(B) * 32 * F1 * T1, 1, 1, 1, eb));
  conv("conv2", {B, 32, F1, T1, 32, 21, 11, 2, 1, 10, 5, 1, false}, true);
  out.push_back(cost::batchnorm("bn2", B, 32, F2 * T1, eb));
  out.push_back(cost::elementwise("hardtanh2", "hardtanh", double(B) * 32 * F2 * T1, 2, 2, 0, eb));
  out.push_back(cost::elementwise("mask2", "mul", double(B) * 32 * F2 * T1, 1, 1, 1, eb));
  int64_t in = 32 * F2;
  for (int64_t i = 0; i < layers; ++i) {
    if (i > 0) out.push_back(cost::batchnorm(fmt::format("rnn{}_bn", i), B * T1, H, 1, eb));
    for (const char* dir : {"fw", "bw"}) {
      auto l = cost::recurrent(fmt::format("rnn{}.{}", i, dir), cell, B, T1, in, H, eb);
      cost::scale_to_packed(l, real);
      out.push_back(l);
    }
    out.push_back(cost::add(fmt::format("rnn{}.sum_directions", i), rows * H, eb));
    in = H;
  }
  out.push_back(cost::batchnorm("fc_bn", B * T1, H, 1, eb));
  out.push_back(cost::linear_nobias("fc", rows, H, classes, eb, true));
  auto log_softmax = cost::softmax_xent("log_softmax", rows, classes, eb);
  log_softmax.op = "log_softmax";
  // CTC consumes the log-probabilities: no NLL loss zero-fills their gradient on a GPU.
  log_softmax.gpu_pass_bytes -= double(eb) * rows * classes;
  out.push_back(log_softmax);
  out.push_back(cost::ctc("ctc", real_frames, lattice, classes, eb));
  // spectrogram, frame mask, lengths, transcripts
  m.input_bytes =
      double(eb) * B * F0 * T + double(eb) * rows + 16.0 * B + 8.0 * B * transcript_length(T);
  return m;
}

FamilySchema deepspeech2_schema() {
  FamilySchema s{
      "deepspeech2",
      "Deep Speech 2 (TBD, LibriSpeech): 2 convolutions, bidirectional GRU/RNN layers, "
      "fully-connected to 29 characters, CTC over 161-bin spectrograms",
      {{"rnn_type", "recurrent cell: gru, or rnn (ReLU)", "gru", 0, 0, {"gru", "rnn"}},
       {"rnn_layers", "bidirectional recurrent layers (TBD 5, the paper 7)", "5", 1, 64, {}},
       {"hidden", "recurrent units per direction", "1760", 1, 1 << 14, {}},
       {"min_frames", "shortest utterance in 10 ms frames", "200", 1, 1 << 20, {}},
       {"max_frames", "longest utterance in 10 ms frames (padded length)", "1500", 1, 1 << 20, {}}},
      "deepspeech2:rnn_type=gru,rnn_layers=2,hidden=64,min_frames=50,max_frames=100,batch=4"};
  s.task = "speech recognition";
  s.throughput_unit = "audio_s";
  s.batch_sweep = {4, 8, 12, 16, 32};
  for (auto& p : common_params(12, "momentum")) s.params.push_back(p);
  s.contract = "deepspeech2:rnn_type=gru,rnn_layers=1,hidden=8,min_frames=20,max_frames=30,batch=2";
  return s;
}

const bool registered = (register_family_schema(deepspeech2_schema()),
                         register_cost("deepspeech2", deepspeech2_cost), true);

}  // namespace
}  // namespace tb
