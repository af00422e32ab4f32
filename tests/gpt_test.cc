// The gpt family's builder against its cost description, beyond the one contract config
// (tests/family_contract_test.cc): every branch's GEMM FLOPs against LibTorch's profiler, the
// named configs' modules, and a training step of each variant.
#include "cost/gpt.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cost/cost.h"
#include "model/workload.h"
#include "runner/memory.h"
#include "runner/profile.h"
#include "runner/runner.h"
#include "support/forward_profile.h"
#include "support/torchvision_ref.h"

namespace tb {
namespace {

const char* const kVariants[] = {
    // GPT-2 style: GELU, LayerNorm, learned positions, tied, biases
    "gpt:layers=2,d_model=48,heads=4,seq=12,vocab=70,batch=2",
    // grouped-query (and multi-query) attention
    "gpt:layers=1,d_model=48,heads=6,kv_heads=2,seq=12,vocab=70,batch=2",
    "gpt:layers=1,d_model=48,heads=6,kv_heads=1,pos=rope,seq=12,vocab=70,batch=2",
    // LLaMA style
    "gpt:layers=2,d_model=64,heads=4,act=swiglu,norm=rmsnorm,pos=rope,tied=off,bias=off,seq=16,"
    "vocab=90,batch=2",
    // mixtures of experts: top-1 with tokens dropped, top-2
    "gpt:layers=1,d_model=32,heads=4,experts=4,top_k=1,capacity=0.5,seq=16,vocab=40,batch=2",
    "gpt:layers=2,d_model=32,heads=4,experts=8,top_k=2,act=swiglu,seq=16,vocab=40,batch=3",
};

TEST(Gpt, EveryVariantsForwardGemmFlopsMatchTheProfiler) {
  for (const char* text : kVariants) {
    const Config c = parse_config(text);
    const double profiled = testing::profile_forward(c).matmul;
    const double modeled = step_cost(c).fwd_matmul_flops;
    EXPECT_NEAR(modeled / profiled, 1.0, 0.01)
        << text << ": model " << modeled << ", profiler " << profiled;
    auto w = build_workload(c);
    int64_t n = 0;
    for (const auto& p : w->module().parameters()) n += p.numel();
    EXPECT_EQ(n, step_cost(c).params) << text;
  }
}

TEST(Gpt, Gpt2SmallBuildsWithItsPublishedParameterCount) {
  auto w = build_workload(parse_config("gpt2-small"));
  int64_t n = 0;
  for (const auto& p : w->module().parameters()) n += p.numel();
  EXPECT_EQ(n, 124439808);
}

TEST(Gpt, EveryVariantTrainsAndItsWeightGradientAndOptimizerBytesMatchTheEstimate) {
  for (const char* text : kVariants) {
    for (const char* dtype : {"fp32", "bf16"}) {
      const Config c = parse_config(std::string(text) + ",threads=1,dtype=" + dtype);
      RunOptions o;
      o.timing.fixed_steps = 3;
      const RunResult r = run_config(c, o);
      ASSERT_EQ(r.status, Status::kOk) << c.str() << ": " << r.error;
      EXPECT_GT(r.units_per_s, 0);
    }
    const Config c = parse_config(std::string(text) + ",threads=1");
    const MemoryRun m = measure_memory(c, MemoryOptions{});
    ASSERT_EQ(m.status, Status::kOk) << m.error;
    const StepCost cost = step_cost(c);
    EXPECT_DOUBLE_EQ(m.breakdown.peak[kWeights], cost.memory.weights) << text;
    EXPECT_DOUBLE_EQ(m.breakdown.peak[kGradients], cost.memory.gradients) << text;
    EXPECT_DOUBLE_EQ(m.breakdown.peak[kOptimizerState], cost.memory.optimizer_state) << text;
  }
}

// Loss and every parameter's gradient of one step of a config, from weights made by `seed`.
std::pair<double, std::vector<torch::Tensor>> one_step(const Config& c, uint64_t seed) {
  torch::manual_seed(seed);
  auto w = build_workload(c);
  const Batch b = w->make_batch(torch::kCPU, torch::kFloat32, 1);
  const auto loss = w->loss(b);
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : w->module().parameters()) grads.push_back(p.grad().clone());
  return {loss.item<double>(), grads};
}

// Recomputation changes where activations live and what runs, never the numbers.
TEST(Gpt, RecomputationGivesTheSameLossAndGradientsWithLessActivationMemory) {
  for (const std::string text :
       {"gpt:layers=3,d_model=32,heads=4,kv_heads=2,pos=rope,seq=24,vocab=50,batch=2",
        "gpt:layers=2,d_model=32,heads=4,experts=4,top_k=2,act=swiglu,seq=24,vocab=50,batch=2"}) {
    const auto plain = one_step(parse_config(text + ",threads=1"), 3);
    double feature_maps_none = 0;
    for (const std::string mode : {"none", "selective", "full"}) {
      const Config c = parse_config(text + ",threads=1,recompute=" + mode);
      const auto again = one_step(c, 3);
      EXPECT_NEAR(again.first, plain.first, 1e-6 * std::abs(plain.first)) << c.str();
      ASSERT_EQ(again.second.size(), plain.second.size());
      for (size_t i = 0; i < plain.second.size(); ++i)
        EXPECT_TRUE(torch::allclose(again.second[i], plain.second[i], 1e-5, 1e-6))
            << c.str() << ": gradient " << i;
      const MemoryRun m = measure_memory(c, MemoryOptions{});
      ASSERT_EQ(m.status, Status::kOk) << m.error;
      const double fm = m.breakdown.peak[kFeatureMaps];
      if (mode == "none")
        feature_maps_none = fm;
      else
        EXPECT_LT(fm, feature_maps_none) << c.str() << ": recomputation kept as much";
      // The re-run forward is work that runs: more hardware FLOPs, the same model FLOPs.
      const StepCost cost = step_cost(c), base = step_cost(parse_config(text));
      EXPECT_EQ(cost.model_flops.total, base.model_flops.total);
      if (mode != "none") EXPECT_GT(cost.flops(), base.flops()) << c.str();
    }
  }
}

// The profiler sees the re-run: the backward phase's GEMMs grow by exactly the forward GEMMs
// re-run (every block's with full, the attention products with selective), as the cost says.
TEST(Gpt, RecomputedForwardGemmsAppearInTheBackwardPhase) {
  const std::string text = "gpt:layers=2,d_model=64,heads=4,seq=32,vocab=200,batch=2,threads=1";
  std::map<std::string, double> backward;
  for (const std::string mode : {"none", "selective", "full"}) {
    ProfileOptions o;
    o.warmup_steps = 1;
    o.steps = 2;
    const ProfileRun run = profile_config(parse_config(text + ",recompute=" + mode), o);
    ASSERT_EQ(run.status, Status::kOk) << run.error;
    double forward = 0;
    for (const auto& op : run.profile.ops)
      if (op.name == "aten::mm" || op.name == "aten::addmm" || op.name == "aten::bmm") {
        if (op.phase == "backward") backward[mode] += op.profiler_flops;
        if (op.phase == "forward") forward += op.profiler_flops;
      }
    EXPECT_NEAR(forward / step_cost(parse_config(text)).fwd_matmul_flops, 1.0, 0.01) << mode;
  }
  const StepCost none = step_cost(parse_config(text));
  double blocks = 0, attention = 0;
  for (const auto& l : none.layers) {
    if (l.name.rfind("layer", 0) == 0) blocks += l.fwd_matmul_flops;
    if (l.op == "attention") attention += l.fwd_matmul_flops;
  }
  EXPECT_NEAR((backward["full"] - backward["none"]) / blocks, 1.0, 0.01);
  EXPECT_NEAR((backward["selective"] - backward["none"]) / attention, 1.0, 0.01);
}

// Loss and gradients of one step under the config's numerics= (the wrapper's points installed
// for the forward pass), weights and stochastic streams made by `seed`.
std::pair<double, std::vector<torch::Tensor>> one_emulated_step(const Config& c, uint64_t seed) {
  auto t = prepare_training(c, torch::kCPU, seed);
  const auto loss = t.workload->loss(t.batch);
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : t.workload->module().parameters()) grads.push_back(p.grad().clone());
  return {loss.item<double>(), grads};
}

// Under emulated formats with stochastic rounding the re-run forward replays the rounding its
// first run drew (model/activation_point.h's PointsReplay), so recomputation still changes
// nothing: without the replay the re-run draws other bits and the gradients move.
TEST(Gpt, RecomputationReplaysTheStochasticRoundingOfEmulatedFormats) {
  const std::string text =
      "gpt:layers=2,d_model=32,heads=4,kv_heads=2,seq=16,vocab=50,batch=2,threads=1,"
      "numerics=a:bf16/stochastic+e:bf16/stochastic";
  const auto plain = one_emulated_step(parse_config(text), 3);
  // The random bits matter: rounding to nearest gives another loss.
  const std::string nearest =
      "gpt:layers=2,d_model=32,heads=4,kv_heads=2,seq=16,vocab=50,batch=2,threads=1,"
      "numerics=a:bf16+e:bf16";
  EXPECT_NE(one_emulated_step(parse_config(nearest), 3).first, plain.first);
  for (const std::string mode : {"selective", "full"}) {
    const auto again = one_emulated_step(parse_config(text + ",recompute=" + mode), 3);
    EXPECT_EQ(again.first, plain.first) << mode;
    ASSERT_EQ(again.second.size(), plain.second.size());
    for (size_t i = 0; i < plain.second.size(); ++i)
      EXPECT_TRUE(torch::allclose(again.second[i], plain.second[i], 1e-5, 1e-6))
          << mode << ": gradient " << i;
  }
  RunOptions o;
  o.timing.fixed_steps = 2;
  const RunResult r = run_config(parse_config(text + ",recompute=full"), o);
  EXPECT_EQ(r.status, Status::kOk) << r.error;
}

// The profile splits the step by model part (model/phase.h's PartScope): each part's
// matrix-product FLOPs, its backward operators found through autograd's links, are the
// cost's model FLOPs of that part; with full recomputation every block's part runs its
// forward twice.
TEST(Gpt, ProfileAttributesOperatorsToModelParts) {
  for (const std::string text :
       {std::string(kVariants[0]), std::string(kVariants[2]), std::string(kVariants[3])}) {
    for (const std::string mode : {"none", "full"}) {
      const Config c = parse_config(text + ",threads=1,recompute=" + mode);
      ProfileOptions o;
      o.warmup_steps = 1;
      o.steps = 2;
      const ProfileRun run = profile_config(c, o);
      ASSERT_EQ(run.status, Status::kOk) << run.error;
      const auto flops = run.profile.part_matmul_flops();
      const auto time = run.profile.part_self_us();
      const auto model = step_cost(c).model_flops.parts;
      ASSERT_EQ(model.size(), 4u);
      for (const auto& [part, f] : model) {
        const double reruns = mode == "full" && part != "logits" ? 4.0 / 3 : 1.0;
        ASSERT_TRUE(flops.count(part)) << c.str() << ": " << part;
        EXPECT_NEAR(flops.at(part) / (f * reruns), 1.0, 0.01) << c.str() << ": " << part;
        EXPECT_GT(time.at(part), 0) << part;
      }
      EXPECT_EQ(run.profile.model_part_flops, model);
    }
  }
}

// The shape as tests/support/gpt_twin.py reads it.
nlohmann::json twin_shape(const Config& c) {
  const GptShape g = gpt_shape(c);
  return {{"layers", g.layers},
          {"d", g.d},
          {"heads", g.heads},
          {"kv_heads", g.kv_heads},
          {"ff", g.ff},
          {"seq", g.seq},
          {"vocab", g.vocab},
          {"positions", g.positions},
          {"experts", g.experts},
          {"top_k", g.top_k},
          {"capacity", g.capacity},
          {"aux_loss", g.aux_loss},
          {"swiglu", g.swiglu},
          {"rmsnorm", g.rmsnorm},
          {"rope", g.rope},
          {"tied", g.tied},
          {"bias", g.bias},
          {"batch", g.batch}};
}

std::optional<nlohmann::json> twin(const std::string& mode, const Config& c) {
  return testing::torchvision_json(std::string(TB_SOURCE_DIR) + "/tests/support/gpt_twin.py",
                                   mode + " '" + twin_shape(c).dump() + "'");
}

// An independent PyTorch implementation (tests/support/gpt_twin.py) with the same parameter
// names and shapes: with its weights loaded, trainbench's module gives the same loss and the
// same gradient for every parameter.
TEST(Gpt, MatchesItsPyTorchTwinInParametersLossAndGradients) {
  for (const char* text :
       {"gpt:layers=2,d_model=24,heads=4,seq=6,vocab=30,batch=2",
        "gpt:layers=2,d_model=32,heads=4,kv_heads=2,act=swiglu,norm=rmsnorm,pos=rope,tied=off,"
        "bias=off,seq=8,vocab=40,batch=2",
        "gpt:layers=1,d_model=16,heads=2,experts=4,top_k=2,capacity=0.75,act=swiglu,pos=rope,"
        "seq=6,vocab=20,batch=2,aux_loss=0.1"}) {
    const Config c = parse_config(std::string(text) + ",threads=1");
    const auto ref = twin("step", c);
    if (!ref) GTEST_SKIP() << "python3 with torch is not installed (python3-torch)";
    auto w = build_workload(c);
    torch::NoGradGuard no_grad_for_loading;
    std::set<std::string> names;
    for (auto& item : w->module().named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor& p = item.value();
      names.insert(name);
      ASSERT_TRUE((*ref)["params"].contains(name)) << text << ": the twin has no " << name;
      const auto& r = (*ref)["params"][name];
      ASSERT_EQ(r["shape"].get<std::vector<int64_t>>(), p.sizes().vec()) << name;
      p.copy_(torch::tensor(r["value"].get<std::vector<float>>()).view(p.sizes()));
    }
    EXPECT_EQ(names.size(), (*ref)["params"].size()) << text;
    const auto rows = (*ref)["tokens"].get<std::vector<std::vector<int64_t>>>();
    std::vector<int64_t> flat;
    for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
    const auto tokens = torch::tensor(flat).view({int64_t(rows.size()), -1});
    Batch b = w->make_batch(torch::kCPU, torch::kFloat32, 1);
    const int64_t s = tokens.size(1) - 1;
    b.inputs[0] = tokens.slice(1, 0, s).contiguous();
    b.target = tokens.slice(1, 1, s + 1).reshape({-1});
    torch::Tensor loss;
    {
      torch::AutoGradMode grad(true);
      loss = w->loss(b);
      loss.backward();
    }
    const double expected = (*ref)["loss"].get<double>();
    EXPECT_NEAR(loss.item<double>(), expected, 1e-5 * std::abs(expected)) << text;
    for (auto& item : w->module().named_parameters()) {
      const std::string& name = item.key();
      const torch::Tensor& p = item.value();
      const auto r = torch::tensor((*ref)["params"][name]["grad"].get<std::vector<float>>());
      ASSERT_TRUE(p.grad().defined()) << name;
      const double scale = std::max(1.0, r.abs().max().item<double>());
      EXPECT_LT((p.grad().reshape({-1}) - r).abs().max().item<double>(), 1e-4 * scale)
          << text << ": gradient of " << name;
    }
  }
}

// TinyLlama is too large to build in a test; its twin is built on PyTorch's meta device.
TEST(Gpt, NamedConfigsHaveTheirParameterCountsInPyTorch) {
  const auto small = twin("count", parse_config("gpt2-small"));
  if (!small) GTEST_SKIP() << "python3 with torch is not installed (python3-torch)";
  EXPECT_EQ((*small)["params"], 124439808);
  const auto tiny = twin("count", parse_config("tinyllama-1.1b"));
  ASSERT_TRUE(tiny);
  EXPECT_EQ((*tiny)["params"], 1100048384);
}

}  // namespace
}  // namespace tb
