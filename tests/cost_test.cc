#include "cost/cost.h"

#include <gtest/gtest.h>

#include "model/workload.h"
#include "support/forward_profile.h"

namespace tb {
namespace {

int64_t built_module_params(const Config& c) {
  auto w = build_workload(c);
  int64_t n = 0;
  for (const auto& p : w->module().parameters()) n += p.numel();
  return n;
}

TEST(Cost, SmallFcByHand) {
  // 2 -> Linear(3) + ReLU -> Linear(4), batch 5, fp32, RMSprop.
  const StepCost c = step_cost(parse_config("fc:layers=1,nodes=3,input=2,output=4,batch=5"));
  EXPECT_EQ(c.params, (2 * 3 + 3) + (3 * 4 + 4));
  // linear 2*5*2*3 + bias 15; relu 15; linear 2*5*3*4 + bias 20; log-softmax 5 per logit
  EXPECT_DOUBLE_EQ(c.fwd_flops, (60 + 15) + 15 + (120 + 20) + 5 * 20);
  EXPECT_DOUBLE_EQ(c.fwd_matmul_flops, 60 + 120);
  // first layer: no input gradient; weight gradient 60 + bias 15
  EXPECT_DOUBLE_EQ(c.bwd_flops, (60 + 15) + 15 + (120 + 120 + 20) + 3 * 20);
  EXPECT_DOUBLE_EQ(c.opt_flops, 11.0 * 25);
  EXPECT_DOUBLE_EQ(c.memory.weights, 4.0 * 25);
  EXPECT_DOUBLE_EQ(c.memory.optimizer_state, 2 * 4.0 * 25);
  // saved: ReLU output (5x3) and log-probabilities (5x4)
  EXPECT_DOUBLE_EQ(c.memory.feature_maps, 4.0 * (15 + 20));
  // forward bytes of the first layer: W, b, X read; Y written (weight-gradient pass too)
  const LayerCost& l0 = c.layers[0];
  EXPECT_DOUBLE_EQ(l0.bytes_read, 4.0 * ((6 + 3 + 10) + (10 + 15)));
  EXPECT_DOUBLE_EQ(l0.bytes_written, 4.0 * (15 + 6 + 3));
}

TEST(Cost, Bf16HalvesBytesNotFlops) {
  const StepCost a = step_cost(parse_config("fc:layers=2,nodes=64,batch=8,dtype=fp32"));
  const StepCost b = step_cost(parse_config("fc:layers=2,nodes=64,batch=8,dtype=bf16"));
  EXPECT_DOUBLE_EQ(a.flops(), b.flops());
  EXPECT_DOUBLE_EQ(a.bytes, 2 * b.bytes);
}

TEST(Cost, CnnStemByHand) {
  const StepCost c =
      step_cost(parse_config("cnn:block=residual,blocks=1,filters=4,image=32,output=10,batch=2"));
  const LayerCost& stem = c.layers[0];
  ASSERT_EQ(stem.op, "conv2d");
  // 7x7/2, padding 3: 32 -> 16; 2 * batch * cout * 16 * 16 * cin * 49
  EXPECT_DOUBLE_EQ(stem.fwd_flops, 2.0 * 2 * 4 * 16 * 16 * 3 * 49);
  EXPECT_EQ(stem.bwd_input_flops, 0);  // the image needs no gradient
  EXPECT_EQ(stem.params, 4 * 3 * 49);
}

TEST(Cost, OptimizerChoiceChangesOnlyOptimizerTerms) {
  const StepCost r = step_cost(parse_config("fc:nodes=16,batch=4,optimizer=rmsprop"));
  const StepCost s = step_cost(parse_config("fc:nodes=16,batch=4,optimizer=sgd"));
  EXPECT_DOUBLE_EQ(r.fwd_flops + r.bwd_flops, s.fwd_flops + s.bwd_flops);
  EXPECT_DOUBLE_EQ(s.opt_flops, 2.0 * s.params);
  EXPECT_EQ(s.memory.optimizer_state, 0);
}

// wgan_gp and a3c are not here: their step is not loss() (critic and generator updates,
// actors acting before they learn), so the cost model's forward FLOPs cover more than one
// loss(). tests/gan_rl_models_test.cc checks their parameter counts against the built module
// and a3c's training-forward FLOPs against the profiler.
const char* kCostConfigs[] = {
    "fc:layers=1,nodes=8,input=16,output=4,batch=2",
    "fc:layers=3,nodes=64,input=100,output=10,batch=16",
    "cnn:block=residual,blocks=1,filters=8,image=32,output=10,batch=2",
    "cnn:block=residual,blocks=2,filters=4,image=64,output=7,batch=2",
    "cnn:block=bottleneck,blocks=1,filters=8,image=32,output=10,batch=2",
    "cnn:block=bottleneck,blocks=2,filters=4,image=48,output=5,batch=1",
    "rnn:cell=rnn,layers=1,embed=16,length=5,vocab=32,batch=3",
    "rnn:cell=lstm,layers=2,embed=16,length=5,vocab=32,batch=3",
    "rnn:cell=gru,layers=3,embed=12,length=4,vocab=20,batch=2",
    // translation and speech reference models (tests/sequence_models_test.cc has more)
    "transformer:layers=1,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3",
    "seq2seq:layers=2,hidden=8,src_vocab=20,tgt_vocab=30,min_len=2,max_len=5,batch=4",
    "deepspeech2:rnn_type=gru,rnn_layers=1,hidden=8,min_frames=20,max_frames=30,batch=2",
};

TEST(Cost, ParameterCountsMatchTheBuiltModule) {
  for (const char* text : kCostConfigs) {
    const Config c = parse_config(text);
    EXPECT_EQ(step_cost(c).params, built_module_params(c)) << text;
  }
}

// LibTorch's own profiler counts FLOPs for mm/addmm/bmm and conv2d; the cost model's
// GEMM/convolution forward FLOPs must agree within 1%.
TEST(Cost, ForwardMatmulFlopsMatchTheProfiler) {
  for (const char* text : kCostConfigs) {
    const Config c = parse_config(text);
    const double profiled = testing::profile_forward(c).matmul;
    const double modeled = step_cost(c).fwd_matmul_flops;
    ASSERT_GT(profiled, 0) << text;
    EXPECT_NEAR(modeled / profiled, 1.0, 0.01)
        << text << " model " << modeled << " profiler " << profiled;
  }
}

TEST(Cost, EveryFamilyHasACostDescription) {
  // A TorchScript file's FLOPs are counted by the profiler (docs/suite.md).
  for (const auto* s : family_schemas())
    EXPECT_TRUE(has_cost(s->name) || s->name == "torchscript") << s->name;
}

}  // namespace
}  // namespace tb
