// The translation and speech reference models (transformer, seq2seq, deepspeech2):
// parameter counts against the reference definitions, the cost descriptions against the
// built modules and LibTorch's profiler, one training step each at tiny sizes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "base/errors.h"
#include "cost/cost.h"
#include "cost/op_cost.h"
#include "model/workload.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/forward_profile.h"

namespace tb {
namespace {

const char* kTransformer = "transformer:layers=2,d_model=32,heads=4,ff=64,vocab=100,seq=10,batch=4";
const char* kSeq2Seq =
    "seq2seq:layers=2,hidden=16,src_vocab=50,tgt_vocab=40,min_len=3,max_len=6,batch=3";
const char* kDeepSpeech2 =
    "deepspeech2:rnn_type=gru,rnn_layers=2,hidden=16,min_frames=40,max_frames=60,batch=2";

int64_t module_params(const Config& c) {
  auto w = build_workload(c);
  int64_t n = 0;
  for (const auto& p : w->module().parameters()) n += p.numel();
  return n;
}

// Runs Debian's PyTorch and returns what it prints, or "" when it is not installed.
std::string python(const std::string& code) {
  if (access("/usr/bin/python3", X_OK) != 0) return "";
  const std::string cmd = "/usr/bin/python3 -c \"" + code + "\" 2>/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

TEST(SequenceModels, TransformerParametersMatchTorchNnTransformer) {
  // torch.nn.Transformer(32, 4, 2, 2, 64) has 42880 parameters (computed by PyTorch 1.13:
  // per encoder layer in_proj 3*32*32+96, out_proj 32*32+32, linear1 32*64+64, linear2
  // 64*32+32, two norms 128 = 8544; per decoder layer 12832; two final norms 64 each);
  // the shared embedding adds vocab x d_model.
  EXPECT_EQ(module_params(parse_config(kTransformer)), 42880 + 100 * 32);
  // Transformer base: torch.nn.Transformer(512, 8, 6, 6, 2048) = 44140544, plus 37000 x 512.
  EXPECT_EQ(module_params(parse_config("transformer")), 44140544 + 37000 * 512);
  const std::string py = python(
      "import torch; print(sum(p.numel() for p in torch.nn.Transformer(32, 4, 2, 2, "
      "64).parameters()),"
      " sum(p.numel() for p in torch.nn.Transformer(512, 8, 6, 6, 2048).parameters()))");
  if (py.empty()) {
    GTEST_LOG_(INFO) << "no /usr/bin/python3 with torch: checked against the recorded counts only";
  } else {
    EXPECT_EQ(py, "42880 44140544");
  }
}

TEST(SequenceModels, Seq2SeqParametersByHand) {
  // hidden 16: embeddings 50*16 + 40*16; encoder, one bidirectional LSTM layer, per
  // direction 4*16*(16+16) + 2*4*16 (LibTorch's two biases); decoder LSTM cells: layer 0
  // takes embedding + previous attention (32): 4*16*(32+16) + 128, layer 1 4*16*(16+16) +
  // 128; memory layer 32*16; the scale g; attention layer (16+32)*16; output 16*40.
  const int64_t small = 50 * 16 + 40 * 16 + 2 * (4 * 16 * 32 + 128) + (4 * 16 * 48 + 128) +
                        (4 * 16 * 32 + 128) + 32 * 16 + 1 + 48 * 16 + 16 * 40;
  EXPECT_EQ(small, 13089);
  EXPECT_EQ(module_params(parse_config(kSeq2Seq)), small);
  // TBD's setting: hidden 512, 17188 words on both sides.
  const int64_t H = 512, V = 17188;
  const int64_t tbd = 2 * V * H + 2 * (4 * H * 2 * H + 8 * H) + (4 * H * 3 * H + 8 * H) +
                      (4 * H * 2 * H + 8 * H) + 2 * H * H + 1 + 3 * H * H + H * V;
  EXPECT_EQ(tbd, 37165057);
  EXPECT_EQ(module_params(parse_config("seq2seq")), tbd);
}

TEST(SequenceModels, DeepSpeech2ParametersByHand) {
  // Frequency 161 -> 81 (41 wide, stride 2, padding 20) -> 41 (21 wide, stride 2, padding
  // 10): 32 x 41 = 1312 features into the first recurrent layer.
  // conv1 32*41*11, bn 64, conv2 32*32*21*11, bn 64; GRU per direction 3H*(in+H) + 6H;
  // BatchNorm (2H) before every recurrent layer but the first; final BN 2H, fc H*29.
  auto ds2 = [](int64_t layers, int64_t H, int64_t gates) {
    int64_t n = 32 * 41 * 11 + 64 + 32 * 32 * 21 * 11 + 64;
    int64_t in = 1312;
    for (int64_t i = 0; i < layers; ++i) {
      if (i > 0) n += 2 * H;
      n += 2 * (gates * H * (in + H) + 2 * gates * H);
      in = H;
    }
    return n + 2 * H + H * 29;
  };
  EXPECT_EQ(ds2(2, 16, 3), 382576);
  EXPECT_EQ(module_params(parse_config(kDeepSpeech2)), 382576);
  EXPECT_EQ(module_params(parse_config(
                "deepspeech2:rnn_type=rnn,rnn_layers=3,hidden=8,min_frames=20,max_frames=30")),
            ds2(3, 8, 1));
  // TBD's setting: 5 bidirectional GRU layers of 1760 units.
  EXPECT_EQ(ds2(5, 1760, 3), 181550464);
}

const char* kSequenceConfigs[] = {
    kTransformer,
    kSeq2Seq,
    kDeepSpeech2,
    "transformer:layers=1,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3",
    "seq2seq:layers=4,hidden=8,src_vocab=20,tgt_vocab=30,min_len=2,max_len=5,batch=4",
    "deepspeech2:rnn_type=rnn,rnn_layers=3,hidden=8,min_frames=20,max_frames=30,batch=3",
};

TEST(SequenceModels, CostParametersMatchTheBuiltModule) {
  for (const char* text : kSequenceConfigs) {
    const Config c = parse_config(text);
    EXPECT_EQ(step_cost(c).params, module_params(c)) << text;
  }
  // The default (reference) configs too: building them only allocates the weights.
  for (const char* text : {"transformer", "seq2seq"}) {
    const Config c = parse_config(text);
    EXPECT_EQ(step_cost(c).params, module_params(c)) << text;
  }
}

// The cost model counts every GEMM, batched GEMM and convolution of the forward pass;
// LibTorch's profiler counts the same ones from the shapes it sees (2 x MACs, bias adds
// left out). Both are exact, so only rounding separates them: 1% as for the generated
// families. The packed recurrent layers agree exactly too, since the cost is scaled to
// the real token count, which is what the packed GEMMs process.
TEST(SequenceModels, ForwardMatmulFlopsMatchTheProfiler) {
  for (const char* text : kSequenceConfigs) {
    const Config c = parse_config(text);
    const auto p = testing::profile_forward(c);
    const double modeled = step_cost(c).fwd_matmul_flops;
    ASSERT_GT(p.matmul, 0) << text;
    EXPECT_NEAR(modeled / p.matmul, 1.0, 0.01)
        << text << " model " << modeled << " profiler " << p.matmul;
  }
}

TEST(SequenceModels, OperatorTableKnowsTheirOperators) {
  const auto t = testing::profile_forward(parse_config(kTransformer));
  EXPECT_GT(t.calls.count("aten::bmm"), 0u);
  EXPECT_GT(t.calls.count("aten::_softmax"), 0u);
  EXPECT_GT(t.calls.count("aten::native_layer_norm"), 0u);
  const auto sm = cost::op_cost("aten::_softmax", {{2, 3, 4}, {}, {}}, {"float", "int", "bool"});
  EXPECT_TRUE(sm.known);
  EXPECT_DOUBLE_EQ(sm.flops, 5 * 24);
  const auto ln = cost::op_cost("aten::native_layer_norm", {{6, 8}, {}, {8}, {8}, {}},
                                {"float", "", "float", "float", "double"});
  EXPECT_DOUBLE_EQ(ln.flops, 7 * 48);
  // log_probs [T=10, B=2, C=29], targets [2, 3]: 10*2 frames x 7 states x 10 FLOPs
  const auto ctc = cost::op_cost("aten::_ctc_loss", {{10, 2, 29}, {2, 3}}, {"float", "long int"});
  EXPECT_DOUBLE_EQ(ctc.flops, 10.0 * 20 * 7);
  EXPECT_EQ(cost::op_class("aten::native_layer_norm"), "normalization");
  EXPECT_EQ(cost::op_class("aten::_ctc_loss"), "softmax-loss");
  EXPECT_EQ(cost::op_class("aten::hardtanh_backward"), "elementwise");
  EXPECT_TRUE(cost::op_cost("aten::native_dropout", {{4, 4}, {}, {}}, {"float"}).known);
}

// One step at tiny sizes: a finite loss, gradients on the parameters, the loss moves,
// and the throughput unit is the real (unpadded) amount of data.
void one_step(const char* text, double expected_units, const char* unit) {
  const Config c = parse_config(text);
  EXPECT_EQ(c.schema().throughput_unit, unit);
  EXPECT_TRUE(c.schema().is_reference());
  TrainingSetup t = prepare_training(c, torch::kCPU, 7);
  EXPECT_DOUBLE_EQ(t.workload->units_per_step(), expected_units) << text;
  const double before = t.workload->loss(t.batch).item<double>();
  ASSERT_TRUE(std::isfinite(before)) << text;
  EXPECT_GT(before, 0) << text;
  for (int i = 0; i < 3; ++i) train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
  int64_t with_grad = 0;
  for (const auto& p : t.workload->module().parameters())
    if (p.grad().defined() && p.grad().abs().sum().item<double>() > 0) ++with_grad;
  EXPECT_GT(with_grad, 0) << text;
  const double after = t.workload->loss(t.batch).item<double>();
  EXPECT_TRUE(std::isfinite(after)) << text;
  EXPECT_NE(before, after) << text;
}

TEST(SequenceModels, TransformerTrainingStep) {
  // batch 4, seq 10: lengths spread over [10/5, 10] = 10, 8, 5, 2 target tokens.
  one_step(kTransformer, 10 + 8 + 5 + 2, "tokens");
}

TEST(SequenceModels, Seq2SeqTrainingStep) {
  one_step(kSeq2Seq, 6 + 5 + 3, "tokens");  // lengths over [3, 6]
}

TEST(SequenceModels, DeepSpeech2TrainingStep) {
  one_step(kDeepSpeech2, (60 + 40) / 100.0, "audio_s");  // 60 and 40 frames of 10 ms
  one_step("deepspeech2:rnn_type=rnn,rnn_layers=1,hidden=8,min_frames=30,max_frames=30,batch=2",
           0.6, "audio_s");
}

TEST(SequenceModels, BadValuesAreUsageErrors) {
  EXPECT_THROW(build_workload(parse_config("transformer:d_model=30,heads=4,vocab=50,seq=5")),
               UsageError);
  EXPECT_THROW(build_workload(parse_config("seq2seq:min_len=9,max_len=5,hidden=8")), UsageError);
  EXPECT_THROW(parse_config("deepspeech2:rnn_type=lstm"), UsageError);
  const auto o = testing::run_cli("run transformer:d_model=30,heads=4");
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("d_model=30"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace tb
