// The gpt family's configs, named configs and FLOP conventions, without LibTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.h"
#include "cost/cost.h"
#include "cost/gpt.h"
#include "spec/config.h"
#include "spec/family.h"

namespace tb {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_config(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GptConfig, BadCombinationsAreOneLineUsageErrorsNamingTheField) {
  EXPECT_EQ(error_of("gpt:d_model=100,heads=12"), "gpt: d_model=100 is not divisible by heads=12");
  EXPECT_EQ(error_of("gpt:heads=12,kv_heads=5"), "gpt: heads=12 is not divisible by kv_heads=5");
  EXPECT_EQ(error_of("gpt:heads=12,kv_heads=24"), "gpt: heads=12 is not divisible by kv_heads=24");
  EXPECT_EQ(error_of("gpt:experts=4,top_k=8"), "gpt: top_k=8 is more than experts=4");
  EXPECT_EQ(error_of("gpt:seq=2048,positions=1024"),
            "gpt: seq=2048 is more than positions=1024 (learned positions)");
  EXPECT_NE(error_of("gpt:pos=rope,positions=512").find("positions=512 applies to pos=learned"),
            std::string::npos);
  EXPECT_NE(error_of("gpt:d_model=36,heads=12,pos=rope").find("even head width"),
            std::string::npos);
  EXPECT_NE(error_of("gpt:capacity=lots").find("capacity=lots: not a number"), std::string::npos);
  EXPECT_NE(error_of("gpt:capacity=0").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("gpt:act=relu").find("gpt: act=relu"), std::string::npos);
}

TEST(GptConfig, DerivedWidthsAreWrittenIntoTheCanonicalText) {
  const Config gelu = parse_config("gpt:d_model=256,heads=8,seq=64");
  EXPECT_EQ(gelu.get("ff"), "1024");
  EXPECT_EQ(gelu.get("kv_heads"), "8");
  EXPECT_EQ(gelu.get("positions"), "64");
  // 8/3 x 2048 = 5461.3, rounded up to a multiple of 64
  EXPECT_EQ(parse_config("gpt:d_model=2048,heads=32,act=swiglu,pos=rope").get("ff"), "5504");
  EXPECT_EQ(parse_config("gpt:d_model=2048,heads=32,act=swiglu,pos=rope").get("positions"), "0");
  EXPECT_EQ(parse_config("gpt:capacity=1.50").get("capacity"), "1.5");
  EXPECT_EQ(parse_config(gelu.str()).str(), gelu.str());
}

// GPT-2 small: 124,439,808 (Hugging Face's openai-community/gpt2 checkpoint, "124M");
// TinyLlama 1.1B: 1,100,048,384 (arXiv:2401.02385, "1.1B"). Both follow from the published
// shapes; tests/gpt_twin_test.cc counts them again with PyTorch's own modules.
TEST(GptConfig, NamedConfigsHaveTheirPublishedParameterCounts) {
  EXPECT_EQ(step_cost(parse_config("gpt2-small")).params, 124439808);
  EXPECT_EQ(step_cost(parse_config("tinyllama-1.1b")).params, 1100048384);
  EXPECT_EQ(parse_config("gpt2-small").family(), "gpt");
  EXPECT_NE(error_of("gpt2-smal").find("named configs: "), std::string::npos);
  for (const NamedConfig* n : named_configs())
    EXPECT_EQ(parse_config(parse_config(n->name).str()).str(), parse_config(n->config).str())
        << n->name;
  // NAME:key=value changes some of a named config's values.
  EXPECT_EQ(
      parse_config("tinyllama-1.1b:seq=256,batch=2"),
      parse_config(find_named_config("tinyllama-1.1b")->config, {{"seq", "256"}, {"batch", "2"}}));
  EXPECT_NE(error_of("gpt2-small:sequence=4").find("unknown parameter 'sequence'"),
            std::string::npos);
}

// Narayanan et al. 2021, eq. 3: 72 B s l h^2 (1 + s / 6h + V / 12 l h) for the plain GPT case.
TEST(GptConfig, ModelFlopsFollowTheMegatronFormula) {
  const Config c = parse_config("gpt2-small");
  const GptShape g = gpt_shape(c);
  const double B = double(g.batch), s = double(g.seq), l = double(g.layers), h = double(g.d),
               V = double(g.vocab);
  const double formula = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  const StepCost cost = step_cost(c);
  EXPECT_NEAR(cost.model_flops.total / formula, 1.0, 1e-12);
  // The cost description's own matrix products, x3, are the same work; its total adds the
  // elementwise operations and the optimizer: a few percent more.
  EXPECT_NEAR(3 * cost.fwd_matmul_flops / formula, 1.0, 0.01);
  EXPECT_GT(cost.flops(), cost.model_flops.total);
  EXPECT_LT(cost.flops(), 1.1 * cost.model_flops.total);
  // Megatron-LM's causal count halves the scores: s / 6h becomes s / 12h.
  const double causal = 72 * B * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h));
  EXPECT_NEAR(cost.model_flops.causal / causal, 1.0, 1e-12);
  double parts = 0;
  for (const auto& [name, f] : cost.model_flops.parts) parts += f;
  EXPECT_NEAR(parts / cost.model_flops.total, 1.0, 1e-12);
}

TEST(GptConfig, MixtureOfExpertsCountsTopKForTheModelAndCapacityForTheHardware) {
  const Config dense = parse_config("gpt:layers=2,d_model=64,heads=4,seq=32,vocab=100,batch=2");
  const Config moe = parse_config(
      "gpt:layers=2,d_model=64,heads=4,seq=32,vocab=100,batch=2,experts=8,top_k=2,capacity=1.25");
  const GptShape g = gpt_shape(moe);
  EXPECT_EQ(g.expert_capacity(), 20);  // ceil(1.25 x 64 tokens x 2 / 8)
  const ModelFlops d = gpt_model_flops(gpt_shape(dense)), m = gpt_model_flops(g);
  const double one_mlp = 3 * 2 * 2.0 * 64 * 64 * 256 * 2;  // 3 x 2 GEMMs x 2 FLOPs x T d ff x l
  EXPECT_DOUBLE_EQ(d.parts.at("mlp"), one_mlp);
  EXPECT_DOUBLE_EQ(m.parts.at("mlp"), 2 * one_mlp + 3 * 2 * 64.0 * 64 * 8 * 2);  // + router
  // What runs: 8 experts x 20 slots = 160 rows per layer against 2 x 64 = 128 assignments.
  const StepCost hw = step_cost(moe);
  double expert_gemms = 0;
  for (const auto& l : hw.layers)
    if (l.name.find(".moe.expert") != std::string::npos) expert_gemms += l.fwd_matmul_flops;
  EXPECT_DOUBLE_EQ(expert_gemms, 2 * 8 * 20 * 2.0 * 2 * 64 * 256);
}

// Rajbhandari et al. 2020, per worker: stage 1 divides the optimizer state by the workers, 2 also
// the gradients, 3 also the weights.
TEST(GptConfig, ZeroStagesPredictPerWorkerMemoryAndTraffic) {
  const std::string base = "gpt:layers=2,d_model=64,heads=4,seq=32,vocab=300,batch=2,workers=4";
  const StepCost s0 = step_cost(parse_config(base));
  const double P = double(s0.params), shard = std::ceil(P / 4);
  EXPECT_EQ(s0.data_parallel.workers, 4);
  EXPECT_DOUBLE_EQ(s0.memory.optimizer_state, 2 * 4 * P);  // AdamW: two moments, fp32
  EXPECT_DOUBLE_EQ(s0.data_parallel.ideal_bytes_per_step, 2 * 0.75 * 4 * P);
  const StepCost s1 = step_cost(parse_config(base + ",zero=1"));
  EXPECT_DOUBLE_EQ(s1.memory.optimizer_state, 2 * 4 * shard);
  EXPECT_DOUBLE_EQ(s1.memory.gradients, 4 * P);
  const StepCost s2 = step_cost(parse_config(base + ",zero=2"));
  EXPECT_DOUBLE_EQ(s2.memory.gradients, 4 * shard);
  EXPECT_DOUBLE_EQ(s2.memory.weights, 4 * P);
  const StepCost s3 = step_cost(parse_config(base + ",zero=3"));
  EXPECT_DOUBLE_EQ(s3.memory.weights, 4 * shard);
  EXPECT_DOUBLE_EQ(s3.data_parallel.ideal_bytes_per_step, 3 * 0.75 * 4 * P);
  EXPECT_EQ(s3.data_parallel.run_bytes_per_step, 0);  // not run
  EXPECT_EQ(error_of("gpt:zero=1"),
            "gpt: zero=1 shards over data-parallel workers: it needs workers > 1");
}

// The memory estimate carries Korthikanti et al. 2022's per-layer activation counts beside
// trainbench's own, and what recomputation saves against none.
TEST(GptConfig, MemoryEstimateShowsKorthikantiBesideItsCountAndWhatRecomputationSaves) {
  const std::string base = "gpt:layers=2,d_model=64,heads=4,seq=32,vocab=100,batch=2";
  auto reference = [](const StepCost& c, const std::string& word) {
    for (const auto& r : c.memory.references)
      if (r.label.find(word) != std::string::npos) return r.bytes;
    ADD_FAILURE() << "no reference mentioning " << word;
    return -1.0;
  };
  const double sbh = 32.0 * 2 * 64, as_h = 4.0 * 32 / 64;
  const StepCost none = step_cost(parse_config(base));
  EXPECT_DOUBLE_EQ(reference(none, "Korthikanti"), sbh * (34 + 5 * as_h));
  double blocks = 0;
  for (const auto& l : none.layers)
    if (l.name.rfind("layer", 0) == 0) blocks += l.saved_bytes;
  EXPECT_DOUBLE_EQ(reference(none, "trainbench"), blocks / 2);
  EXPECT_EQ(none.memory.references.size(), 2u);  // nothing saved: no line for it
  const StepCost selective = step_cost(parse_config(base + ",recompute=selective"));
  EXPECT_DOUBLE_EQ(reference(selective, "Korthikanti"), 34 * sbh);
  const StepCost full = step_cost(parse_config(base + ",recompute=full"));
  EXPECT_DOUBLE_EQ(reference(full, "Korthikanti"), 2 * sbh);
  EXPECT_DOUBLE_EQ(reference(full, "saves"), none.memory.feature_maps - full.memory.feature_maps);
  EXPECT_GT(reference(selective, "saves"), 0);
  // References stay outside the total.
  EXPECT_DOUBLE_EQ(none.memory.total(), none.memory.weights + none.memory.gradients +
                                            none.memory.optimizer_state + none.memory.feature_maps +
                                            none.memory.inputs + none.memory.workspace);
}

}  // namespace
}  // namespace tb
