// Time to accuracy: emulation results in the store, the emulated networks' cost, TTA
// arithmetic and "not reached" on stored synthetic results, and the CLI's errors.
#include "analysis/tta.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>

#include "analysis/convergence_test.h"
#include "base/errors.h"
#include "cost/cost.h"
#include "cost/fashion_mnist.h"
#include "emulation/descriptor.h"
#include "emulation/numerics_workload.h"
#include "numerics/policy.h"
#include "report/html_report.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"
#include "store/store.h"
#include "support/cli.h"
#include "support/files.h"

namespace tb {
namespace {

using json = nlohmann::json;

std::string temp_store(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  return path;
}

json seed(int64_t s, std::optional<int64_t> iterations) {
  json curve = json::array({{100, 0.7}, {200, 0.8}, {300, 0.86}});
  return {{"seed", s},
          {"iterations_to_target", iterations ? json(*iterations) : json()},
          {"reached", bool(iterations)},
          {"best_accuracy", iterations ? 0.86 : 0.84},
          {"skipped_steps", 0},
          {"final_loss_scale", 1.0},
          {"seconds", 1.5},
          {"curve", curve}};
}

json variant(const std::string& format, const std::string& policy) {
  json points = json::object();
  for (const char* p :
       {"weights", "activations", "errors", "weight_grads", "optimizer_state", "master"})
    points[p] = format == "fp32" ? json{{"format", "off"}}
                                 : json{{"format", format}, {"rounding", "nearest-even"}};
  return {{"model", "mlp"},       {"batch", 64},
          {"target", 0.85},       {"points", points},
          {"loss_scale", "none"}, {"unit", ""},
          {"activation", "relu"}, {"policy", policy},
          {"format", format},     {"cost_config", cost::fashion_mnist_cost_config("mlp", 64)}};
}

// Three variants: fp32 {100, 200, 300}, e4m3 {150, 150, 300}, bf16 with a seed that never
// reached the target.
std::string filled_store() {
  const std::string path = temp_store("tta");
  auto store = Store::open(path);
  const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
  const int64_t s = store->stack_id({{"blas", "x"}});
  store->add_emulation(variant("fp32", "fp32 policy"), {seed(1, 100), seed(2, 200), seed(3, 300)},
                       p, s);
  store->add_emulation(variant("e4m3", "e4m3 policy"), {seed(1, 150), seed(2, 150), seed(3, 300)},
                       p, s);
  store->add_emulation(variant("bf16", "bf16 policy"), {seed(1, 100), seed(2, std::nullopt)}, p, s);
  return path;
}

PlatformDescription accel() {
  PlatformDescription p;
  p.name = "accel";
  p.kind = "accelerator";
  p.source = "test";
  p.memory_gb = 16;
  p.memory_bandwidth_gbps = 100;
  p.peak_tflops = {{"fp32", 1}, {"bf16", 2}, {"fp8", 4}};
  p.systolic_array = PlatformDescription::Systolic{16, 16, "weight-stationary"};
  return p;
}

TEST(EmulationStore, RoundTripsVariantSeedsAndCurves) {
  const std::string path = filled_store();
  auto store = Store::open_read_only(path);
  const auto e = store->emulations();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0]["variant"], variant("fp32", "fp32 policy"));
  ASSERT_EQ(e[1]["seeds"].size(), 3u);
  EXPECT_EQ(e[1]["seeds"][0], seed(1, 150));
  EXPECT_TRUE(e[2]["seeds"][1]["iterations_to_target"].is_null());
  EXPECT_EQ(e[2]["seeds"][1]["curve"], seed(2, std::nullopt)["curve"]);
  std::remove(path.c_str());
}

TEST(EmulationStore, SameVariantAgainReplacesItsSeeds) {
  const std::string path = filled_store();
  {
    auto store = Store::open(path);
    const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
    store->add_emulation(variant("fp32", "fp32 policy"), {seed(1, 400)}, p,
                         store->stack_id({{"blas", "x"}}));
    const auto e = store->emulations();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0]["seeds"][0]["iterations_to_target"], 400);
    EXPECT_EQ(e[0]["seeds"].size(), 3u);  // seeds 2 and 3 kept
  }
  std::remove(path.c_str());
}

TEST(EmulationStore, MergeCarriesVariantsOverOnce) {
  const std::string path = filled_store(), merged = temp_store("tta-merged");
  {
    auto in = Store::open_read_only(path);
    auto out = Store::open(merged);
    out->merge_from(*in);
    out->merge_from(*in);
    const auto e = out->emulations();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[1]["variant"], variant("e4m3", "e4m3 policy"));
    ASSERT_EQ(e[1]["seeds"].size(), 3u);
    EXPECT_EQ(e[1]["seeds"][2], seed(3, 300));
    EXPECT_TRUE(e[2]["seeds"][1]["iterations_to_target"].is_null());
  }
  std::remove(path.c_str());
  std::remove(merged.c_str());
}

// A run in several stores is kept once, by one rule whatever the order of the stores: a
// success over a failure, else the later finish; the counts say what was dropped.
TEST(RunStore, MergeKeepsTheLaterOrSuccessfulRunWhateverTheOrder) {
  const std::string cfg = "fc:layers=1,nodes=8,input=8,output=2,batch=4,threads=1";
  const auto store_with = [&](const std::string& name, const std::string& status,
                              const std::string& finished, double rate) {
    const std::string path = temp_store(name);
    auto s = Store::open(path);
    const json r = {{"config", cfg},
                    {"status", status},
                    {"started_at", finished},
                    {"finished_at", finished},
                    {"metrics", {{"examples_per_s", rate}}}};
    s->add_run(r, s->platform_id({{"host", "h"}}, "h", json()), s->stack_id({{"blas", "x"}}), "",
               false);
    return path;
  };
  const std::string early = store_with("m-early", "ok", "2026-11-30T01:00:00Z", 100),
                    late = store_with("m-late", "ok", "2026-11-30T02:00:00Z", 200),
                    failed = store_with("m-failed", "crashed", "2026-11-30T03:00:00Z", 0);
  for (const auto& order : std::vector<std::vector<std::string>>{
           {early, late, failed}, {failed, late, early}, {late, early, failed}}) {
    const std::string merged = temp_store("m-out");
    auto out = Store::open(merged);
    Store::MergeCounts n;
    for (const auto& in : order) {
      auto src = Store::open_read_only(in);
      const auto m = out->merge_from(*src);
      n.added += m.added, n.replaced += m.replaced, n.kept += m.kept;
    }
    EXPECT_EQ(n.added, 1);
    EXPECT_EQ(n.added + n.replaced + n.kept, 3);
    const json r = out->run_result(cfg, out->platform_id({{"host", "h"}}, "h", json()),
                                   out->stack_id({{"blas", "x"}}));
    EXPECT_EQ(r["status"], "ok");
    EXPECT_EQ(r["finished_at"], "2026-11-30T02:00:00Z");
    std::remove(merged.c_str());
  }
  for (const auto& p : {early, late, failed}) std::remove(p.c_str());
}

// What rounding did, per point and evaluation, survives JSON text, an Inf amax (an overflowed
// tensor, which JSON writes as null) included.
TEST(EmulationStore, ScalingSamplesRoundTripThroughJsonWithAnInfAmax) {
  tb::emu::ScalingSample a;
  a.point = "e.1";
  a.iteration = 25;
  a.amax = INFINITY;
  a.scale_min = 0.5;
  a.scale_max = 4096;
  a.sites = 3;
  a.values = 1000;
  a.overflow = 7;
  a.underflow = 9;
  a.nonfinite = 2;
  const auto back = tb::scaling_from_json(json::parse(tb::to_json(std::vector{a}).dump()));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].point, "e.1");
  EXPECT_EQ(back[0].iteration, 25);
  EXPECT_TRUE(std::isinf(back[0].amax));
  EXPECT_EQ(back[0].scale_max, 4096);
  EXPECT_EQ(back[0].sites, 3);
  EXPECT_EQ(back[0].values, 1000u);
  EXPECT_EQ(back[0].overflow, 7u);
  EXPECT_EQ(back[0].underflow, 9u);
  EXPECT_EQ(back[0].nonfinite, 2u);
  // Summed over runs per point.
  const auto sum = tb::emu::summarize_scaling({{a}, {a}});
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].values, 2000u);
}

TEST(EmulationStore, AStoreFromBeforeEmulationTablesStillOpens) {
  const std::string path = temp_store("old");
  {
    auto store = Store::open(path);
    store->platform_id({{"host", "h"}}, "h", json());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE emulation_seed; DROP TABLE emulation_variant;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_TRUE(Store::open_read_only(path)->emulations().empty());
  EXPECT_TRUE(load_emulations({path}).empty());
  auto store = Store::open(path);  // read-write: the tables are added
  const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
  store->add_emulation(variant("fp32", "x"), {seed(1, 5)}, p, store->stack_id({{"b", 1}}));
  EXPECT_EQ(store->emulations().size(), 1u);
  std::remove(path.c_str());
}

TEST(FashionMnistCost, ParametersAndGemmFlopsOfBothModels) {
  const StepCost mlp = cost::fashion_mnist_cost("mlp", 64);
  EXPECT_EQ(mlp.params, 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_DOUBLE_EQ(mlp.fwd_matmul_flops, 2.0 * 64 * (784 * 256 + 256 * 128 + 128 * 10));
  const StepCost cnn = cost::fashion_mnist_cost("cnn", 32);
  EXPECT_EQ(cnn.params, 8 * 25 + 8 + 16 * 8 * 25 + 16 + 16 * 7 * 7 * 10 + 10);
  EXPECT_DOUBLE_EQ(cnn.fwd_matmul_flops,
                   2.0 * 32 * (28 * 28 * 8 * 25 + 14 * 14 * 16 * 8 * 25 + 16 * 7 * 7 * 10));
  EXPECT_THROW(cost::fashion_mnist_cost("resnet", 1), UsageError);
  std::string model;
  int64_t batch = 0;
  ASSERT_TRUE(cost::parse_fashion_mnist_cost_config("fashion-mnist-cnn:batch=32", &model, &batch));
  EXPECT_EQ(model, "cnn");
  EXPECT_EQ(batch, 32);
  EXPECT_FALSE(cost::parse_fashion_mnist_cost_config("fc:layers=1", &model, &batch));
}

TEST(Tta, IterationsTimesSimulatedStepAgainstTheFp32Baseline) {
  const std::string path = filled_store();
  const PlatformDescription p = accel();
  const auto e = load_emulations({path});  // the result points into it
  const TtaResult r = time_to_accuracy(e, p);
  ASSERT_EQ(r.variants.size(), 3u);
  const StepCost c = cost::fashion_mnist_cost("mlp", 64);
  const double step32 = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32")).step_s;
  const double step8 = sim::simulate_step(p, c, 4, sim::resolve_format(p, "e4m3")).step_s;
  EXPECT_LT(step8, step32);
  const auto& base = r.variants[0];
  EXPECT_TRUE(base.baseline);
  EXPECT_DOUBLE_EQ(base.step_s, step32);
  EXPECT_DOUBLE_EQ(*base.tta_s, 200 * step32);
  EXPECT_DOUBLE_EQ(*base.tta_mlperf_s, 200 * step32);  // drop 100 and 300
  EXPECT_DOUBLE_EQ(*base.speedup, 1);
  const auto& f8 = r.variants[1];
  EXPECT_DOUBLE_EQ(*f8.tta_s, 200 * step8);
  EXPECT_DOUBLE_EQ(*f8.tta_mlperf_s, 150 * step8);
  EXPECT_DOUBLE_EQ(*f8.tta_min_s, 150 * step8);
  EXPECT_DOUBLE_EQ(*f8.tta_max_s, 300 * step8);
  EXPECT_DOUBLE_EQ(*f8.speedup, step32 / step8);
  // Not reached: counted, never a number.
  const auto& nr = r.variants[2];
  EXPECT_EQ(nr.seeds, 2);
  EXPECT_EQ(nr.reached, 1);
  EXPECT_FALSE(nr.tta_s);
  EXPECT_FALSE(nr.speedup);
  const json j = to_json(r);
  EXPECT_TRUE(j["variants"][2]["tta_s"].is_null());
  EXPECT_EQ(j["variants"][2]["status"], "ok");
  EXPECT_EQ(j["variants"][2]["convergence"], "not reached");
  EXPECT_EQ(j["variants"][0]["convergence"], "reached");
  EXPECT_NE(format_tta(r).find("not reached: 1 of 2"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Tta, AFamilyConfigIsSimulatedFromItsOwnCostDescription) {
  const std::string path = temp_store("tta-family");
  const std::string config = "fc:layers=2,nodes=64,input=784,output=10,batch=32,optimizer=momentum";
  {
    auto store = Store::open(path);
    const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
    const int64_t s = store->stack_id({{"blas", "x"}});
    json v = variant("fp32", "fp32 policy");
    v["model"] = config;
    v["cost_config"] = config;
    store->add_emulation(v, {seed(1, 100)}, p, s);
    v["cost_config"] = "no-such-family:x=1";
    v["policy"] = "broken";
    store->add_emulation(v, {seed(1, 100)}, p, s);
  }
  const PlatformDescription p = accel();
  const auto e = load_emulations({path});
  std::vector<StoredEmulation> good(e.begin(), e.begin() + 1);
  const TtaResult r = time_to_accuracy(good, p);
  ASSERT_EQ(r.variants.size(), 1u);
  const double step =
      sim::simulate_step(p, step_cost(parse_config(config)), 4, sim::resolve_format(p, "fp32"))
          .step_s;
  EXPECT_GT(step, 0);
  EXPECT_DOUBLE_EQ(r.variants[0].step_s, step);
  EXPECT_DOUBLE_EQ(*r.variants[0].tta_s, 100 * step);
  EXPECT_THROW(time_to_accuracy(e, p), UsageError);  // the second names no known network
  std::remove(path.c_str());
}

TEST(Tta, ChosenBaselineAndBadBaseline) {
  const std::string path = filled_store();
  const auto e = load_emulations({path});
  const TtaResult r = time_to_accuracy(e, accel(), "2");
  EXPECT_TRUE(r.variants[1].baseline);
  EXPECT_FALSE(r.variants[0].baseline);
  EXPECT_DOUBLE_EQ(*r.variants[1].speedup, 1);
  EXPECT_LT(*r.variants[0].speedup, 1);
  EXPECT_TRUE(time_to_accuracy(e, accel(), "e4m3 policy").variants[1].baseline);
  EXPECT_THROW(time_to_accuracy(e, accel(), "9"), UsageError);
  std::remove(path.c_str());
}

// Iterations counted under another protocol (evaluated every 30 iterations against every 10)
// are not compared: each protocol has its own fp32 baseline, and a variant with none of its
// own gets no speedup and says why, by default and against a chosen baseline.
TEST(Tta, OnlyVariantsTrainedAndEvaluatedAlikeAreCompared) {
  const std::string path = temp_store("tta-protocol");
  {
    auto store = Store::open(path);
    const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
    const int64_t s = store->stack_id({{"blas", "x"}});
    const auto every = [](json v, int n) {
      v["eval_every"] = n;
      v["eval_examples"] = 500;
      v["lr"] = 0.05;
      v["momentum"] = 0.9;
      return v;
    };
    store->add_emulation(every(variant("fp32", "fp32 policy"), 30), {seed(1, 30)}, p, s);
    store->add_emulation(every(variant("e4m3", "e4m3 policy"), 10), {seed(1, 20)}, p, s);
    store->add_emulation(every(variant("fp32", "fp32 policy"), 10), {seed(1, 10)}, p, s);
    store->add_emulation(every(variant("bf16", "bf16 policy"), 5), {seed(1, 10)}, p, s);
  }
  const auto e = load_emulations({path});
  ASSERT_EQ(e.size(), 4u);
  const TtaResult r = time_to_accuracy(e, accel());
  EXPECT_TRUE(r.variants[0].baseline);
  EXPECT_TRUE(r.variants[2].baseline);
  // e4m3 against the fp32 evaluated as it was (10 iterations against 20: half the speed in
  // iterations), not against the first fp32 (30: 1.5x).
  ASSERT_TRUE(r.variants[1].speedup);
  EXPECT_NEAR(*r.variants[1].speedup / (r.variants[2].step_s / r.variants[1].step_s), 0.5, 1e-12);
  EXPECT_EQ(r.variants[1].no_speedup, "");
  // bf16, evaluated every 5, has no baseline of its own.
  EXPECT_FALSE(r.variants[3].speedup);
  EXPECT_NE(r.variants[3].no_speedup.find("evaluated every 30 iterations on 500 examples; this: "
                                          "batch 64, lr 0.05, momentum 0.9, evaluated every 5"),
            std::string::npos)
      << r.variants[3].no_speedup;
  const std::string text = format_tta(r);
  EXPECT_NE(text.find("protocol: batch 64, lr 0.05, momentum 0.9, evaluated every 10 iterations"),
            std::string::npos)
      << text;
  EXPECT_EQ(to_json(r)["variants"][3]["speedup_vs_baseline"], json());
  EXPECT_NE(to_json(r)["variants"][3]["no_speedup"].get<std::string>(), "");
  // Chosen: the fp32 of every 30 compares with nothing else.
  const TtaResult chosen = time_to_accuracy(e, accel(), "1");
  for (size_t i : {1, 2, 3}) {
    EXPECT_FALSE(chosen.variants[i].speedup) << i;
    EXPECT_NE(chosen.variants[i].no_speedup.find("baseline 1"), std::string::npos) << i;
  }
  std::remove(path.c_str());
}

// --run-as simulates a variant's step in another format (as the accelerator would train it),
// by number or by policy text, a policy holding '=' itself included; the emulated format stays
// beside it. An item naming no variant is refused.
TEST(Tta, RunAsSimulatesAVariantInTheFormatTheAcceleratorTrainsIt) {
  const std::string path = filled_store();
  {
    auto store = Store::open(path);
    const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
    const int64_t s = store->stack_id({{"blas", "x"}});
    store->add_emulation(variant("e4m3", "w=e4m3 policy"), {seed(1, 150)}, p, s);
  }
  PlatformDescription p = accel();
  p.kind = "gpu";
  p.systolic_array.reset();
  const auto e = load_emulations({path});
  const TtaResult r = time_to_accuracy(
      e, p, "",
      {"1=amp-bf16", "e4m3 policy=amp-fp8@current", "w=e4m3 policy=amp-fp8-eager@current"});
  const StepCost c = cost::fashion_mnist_cost("mlp", 64);
  auto step = [&](const char* f) {
    return sim::simulate_step(p, c, 4, sim::resolve_format(p, f)).step_s;
  };
  ASSERT_EQ(r.variants.size(), 4u);
  EXPECT_EQ(r.variants[0].format, "amp-bf16");
  EXPECT_EQ(r.variants[0].emulated_format, "fp32");
  EXPECT_DOUBLE_EQ(r.variants[0].step_s, step("amp-bf16"));
  EXPECT_EQ(r.variants[1].format, "amp-fp8@current");
  EXPECT_DOUBLE_EQ(r.variants[1].step_s, step("amp-fp8@current"));
  EXPECT_NE(r.variants[1].step_s, step("e4m3"));
  EXPECT_GT(sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-fp8@current")).fp8_layers, 0);
  EXPECT_DOUBLE_EQ(*r.variants[1].speedup,
                   200 * step("amp-bf16") / (200 * step("amp-fp8@current")));
  EXPECT_TRUE(r.variants[2].emulated_format.empty());  // not named: its own format
  EXPECT_DOUBLE_EQ(r.variants[2].step_s, step("bf16"));
  EXPECT_EQ(r.variants[3].format, "amp-fp8-eager@current");
  EXPECT_DOUBLE_EQ(r.variants[3].step_s, step("amp-fp8-eager@current"));
  EXPECT_GT(r.variants[3].step_s, r.variants[1].step_s);
  EXPECT_NE(format_tta(r).find("format amp-bf16 (run as; emulated in fp32)"), std::string::npos)
      << format_tta(r);
  EXPECT_EQ(to_json(r)["variants"][0]["emulated_format"], "fp32");
  for (const char* bad : {"9=amp-bf16", "amp-bf16", "1=", "no policy=amp-bf16", "1=amp-fp9"})
    EXPECT_THROW(time_to_accuracy(e, p, "", {bad}), UsageError) << bad;
  // A variant named twice, by the same key or by its number and its policy.
  EXPECT_THROW(time_to_accuracy(e, p, "", {"1=amp-bf16", "1=tf32"}), UsageError);
  EXPECT_THROW(time_to_accuracy(e, p, "", {"2=amp-bf16", "e4m3 policy=tf32"}), UsageError);
  // A format the accelerator has no peak for, asked for by name: refused, not unsupported.
  PlatformDescription no_fp8 = p;
  no_fp8.peak_tflops.erase("fp8");
  EXPECT_THROW(time_to_accuracy(e, no_fp8, "", {"2=amp-fp8@current"}), UsageError);
  std::remove(path.c_str());
}

TEST(Tta, ComputeFormatIsTheWidestGemmInput) {
  emu::Policy p;
  EXPECT_EQ(compute_format(p), "fp32");
  p.weights = emu::QuantPoint::parse("e4m3");
  EXPECT_EQ(compute_format(p), "fp32");  // activations still fp32
  p.activations = emu::QuantPoint::parse("e4m3");
  p.errors = emu::QuantPoint::parse("e5m2");
  EXPECT_EQ(compute_format(p), "e4m3");
  p.errors = emu::QuantPoint::parse("bf16");
  EXPECT_EQ(compute_format(p), "bf16");
  // Transformer Engine's placement: activations off globally, on each Linear layer's input.
  emu::Policy te = emu::policy_from(
      num::parse_numerics("w:e4m3@delayed+e:e5m2@delayed+a.0:e4m3@delayed+a.1:e4m3@delayed"), 0);
  EXPECT_EQ(compute_format(te), "e4m3@delayed:1024:max");
  // A global point wins over a layer's own (the first layer in bf16 under e4m3).
  emu::Policy first = emu::policy_from(num::parse_numerics("e4m3+a.0:bf16"), 0);
  EXPECT_EQ(compute_format(first), "e4m3");
  emu::EmulationOptions o;
  const json v = variant_descriptor(o, p);
  EXPECT_EQ(v["points"]["errors"]["format"], "bf16");
  EXPECT_EQ(v["points"]["master"]["format"], "off");
  EXPECT_EQ(v["cost_config"], "fashion-mnist-mlp:batch=64");
}

// The language task's variants: a validation-loss target on a gpt config, stored with each
// seed's best loss, compared with the fp32 variant of the same target only, and charted apart.
TEST(Tta, LossTargetVariantsOfTheLanguageTask) {
  const std::string path = temp_store("tta-loss");
  const std::string config =
      "gpt:layers=2,d_model=128,heads=4,kv_heads=4,ff=512,seq=64,vocab=256,batch=64,"
      "optimizer=adamw";
  const auto loss_seed = [](int64_t s, int64_t iterations) {
    json r = seed(s, iterations);
    r.erase("best_accuracy");
    r["best_loss"] = 1.55;
    r["curve"] = json::array({{100, 2.5}, {200, 1.8}, {300, 1.55}});
    emu::ScalingSample a;
    a.point = "a";
    a.iteration = 100;
    a.values = 1000;
    a.underflow = 25;
    a.scale_min = 2, a.scale_max = 64;
    r["scaling"] = to_json(std::vector<emu::ScalingSample>{a});
    return r;
  };
  const auto loss_variant = [&](const std::string& format, const std::string& policy) {
    json v = variant(format, policy);
    v["model"] = v["cost_config"] = config;
    v["dataset"] = "gcide";
    v["metric"] = "loss";
    v["target"] = 1.6;
    return v;
  };
  {
    auto store = Store::open(path);
    const int64_t p = store->platform_id({{"host", "h"}}, "h", json());
    const int64_t s = store->stack_id({{"blas", "x"}});
    store->add_emulation(loss_variant("fp32", "fp32 lm"),
                         {loss_seed(1, 200), loss_seed(2, 300), loss_seed(3, 400)}, p, s);
    store->add_emulation(loss_variant("e4m3", "e4m3 lm"),
                         {loss_seed(1, 300), loss_seed(2, 300), loss_seed(3, 300)}, p, s);
    // A diverged run: not reached, no best loss; stored and read back as such.
    json diverged = loss_seed(4, 0);
    diverged["iterations_to_target"] = json();
    diverged["reached"] = false;
    diverged["best_loss"] = json();
    auto lm = loss_variant("bf16", "diverged lm");
    store->add_emulation(lm, {diverged}, p, s);
    // A Fashion-MNIST variant in the same store: a baseline of its own.
    store->add_emulation(variant("fp32", "fp32 mlp"), {seed(1, 100)}, p, s);
  }
  {
    auto store = Store::open_read_only(path);
    const auto e = store->emulations();
    ASSERT_EQ(e.size(), 4u);
    EXPECT_EQ(e[0]["seeds"][0], loss_seed(1, 200));  // best_loss, no best_accuracy
    EXPECT_EQ(e[1]["seeds"].size(), 3u);
    EXPECT_TRUE(e[2]["seeds"][0]["best_loss"].is_null());  // diverged
    EXPECT_FALSE(e[2]["seeds"][0].contains("best_accuracy"));
    EXPECT_EQ(e[3]["seeds"][0], seed(1, 100));
  }
  auto e = load_emulations({path});
  e.erase(e.begin() + 2);
  const TtaResult r = time_to_accuracy(e, accel());
  ASSERT_EQ(r.variants.size(), 3u);
  EXPECT_TRUE(r.variants[0].baseline);
  EXPECT_TRUE(r.variants[2].baseline);  // not compared with the language task's
  EXPECT_EQ(r.variants[1].target_text(), "validation loss <= 1.6 (gcide)");
  EXPECT_EQ(r.variants[2].target_text(), "test accuracy >= 0.85");
  const double step32 = sim::simulate_step(accel(), step_cost(parse_config(config)), 4,
                                           sim::resolve_format(accel(), "fp32"))
                            .step_s;
  EXPECT_DOUBLE_EQ(*r.variants[0].tta_s, 300 * step32);
  const double step8 = r.variants[1].step_s;
  EXPECT_LT(step8, step32);
  EXPECT_NEAR(*r.variants[1].speedup, 300 * step32 / (300 * step8), 1e-12);
  EXPECT_NE(format_tta(r).find("target validation loss <= 1.6 (gcide)"), std::string::npos);
  EXPECT_EQ(to_json(r)["variants"][1]["metric"], "loss");
  const std::string out = ::testing::TempDir() + "/tta-loss-" + std::to_string(getpid()) + ".html";
  ReportOptions o;
  o.tta_platform = "tpu-v2-board";
  write_report({path}, out, o);
  const std::string h = ::tb::testing::read_text(out);
  EXPECT_NE(h.find("\"tta_loss\""), std::string::npos);  // the loss chart's table
  EXPECT_NE(h.find("Validation loss vs simulated training time"), std::string::npos);
  EXPECT_NE(h.find("\"tta\""), std::string::npos);  // and the accuracy chart's
  // What rounding did: a chart over the evaluations and a table summed over seeds (3 x 25 of
  // 3 x 1000 flushed).
  EXPECT_NE(h.find("\"tta_rounding\""), std::string::npos);
  EXPECT_NE(h.find("<th>flushed to 0</th>"), std::string::npos);
  EXPECT_NE(h.find("2.5000%"), std::string::npos);
  std::remove(out.c_str());
  std::remove(path.c_str());
}

TEST(Tta, ReportSectionWithTableAndChart) {
  const std::string path = filled_store();
  const std::string out = ::testing::TempDir() + "/tta-" + std::to_string(getpid()) + ".html";
  ReportOptions o;
  o.tta_platform = "tpu-v2-board";
  const ReportStats st = write_report({path}, out, o);
  EXPECT_GE(st.charts, 1u);
  const std::string h = ::tb::testing::read_text(out);
  EXPECT_NE(h.find("Time to accuracy on tpu-v2-board"), std::string::npos);
  EXPECT_NE(h.find("not reached"), std::string::npos);
  EXPECT_NE(h.find("\"tta\""), std::string::npos);  // the chart's table
  std::remove(out.c_str());
  std::remove(path.c_str());
}

// The statistics behind "the variant needs more iterations" and the speedup's interval, on a
// small example. The expected values were computed apart from the code and its library (a
// Python script: Welch's statistic and degrees of freedom by hand, the t distribution's tail
// and quantiles by Simpson integration of its density): t 2.424871, dof 4.411765, one-sided
// p 0.033229; speedup 0.893939 in [0.792851, 1.007917] (t quantile 2.677174, delta method on
// the log ratio); cv 0.0633916, 6 seeds per side to tell 10% at 5% with 80% power.
TEST(ConvergenceTest, WelchTestIntervalAndSeedsMatchAnIndependentComputation) {
  const auto c = compare_iterations({150, 160, 170, 180}, {140, 145, 150, 155});
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(c->t, 2.424871, 1e-6);
  EXPECT_NEAR(c->dof, 4.411765, 1e-6);
  EXPECT_NEAR(c->p_more, 0.033229, 1e-5);
  EXPECT_NEAR(c->ratio, 0.893939, 1e-6);
  EXPECT_NEAR(c->ratio_lo, 0.792851, 1e-5);
  EXPECT_NEAR(c->ratio_hi, 1.007917, 1e-5);
  EXPECT_EQ(c->seeds_for_10pct, 6);
  // The other direction: a faster variant is not "more iterations".
  const auto faster = compare_iterations({140, 145, 150, 155}, {150, 160, 170, 180});
  ASSERT_TRUE(faster.has_value());
  EXPECT_NEAR(faster->p_more, 1 - 0.033229, 1e-5);
  // No spread on either side: no interval width, and the test decides by the means alone.
  const auto flat = compare_iterations({200, 200}, {150, 150});
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->p_more, 0);
  EXPECT_EQ(flat->ratio_lo, flat->ratio_hi);
  // One run on a side has no variance: no test.
  EXPECT_FALSE(compare_iterations({150}, {140, 150}).has_value());
}

TEST(TtaCli, UnknownPlatformAndMissingStoreExit2WithOneLine) {
  const std::string path = filled_store();
  const auto a = testing::run_cli("tta --store " + path + " --platform no-such-accel");
  EXPECT_EQ(a.status, 2);
  EXPECT_NE(a.err.find("no-such-accel"), std::string::npos) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.err;
  const auto b = testing::run_cli("tta --store /nonexistent/x.db --platform tpu-v2-board");
  EXPECT_EQ(b.status, 2);
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  const auto c = testing::run_cli("tta --store " + path + " --platform tpu-v2-board --json");
  ASSERT_EQ(c.status, 0) << c.err;
  const json j = json::parse(c.out);
  EXPECT_EQ(j["results"]["variants"].size(), 3u);
  // TPU v2 states no fp8 peak nor runs_as for it: the e4m3 variant is unsupported there.
  for (const auto& v : j["results"]["variants"])
    EXPECT_EQ(v["status"] == "unsupported", v["format"] == "e4m3") << v.dump();
  EXPECT_TRUE(j.contains("context"));
  std::remove(path.c_str());
  // A store without emulations, and simulate --validate over runs whose platform has no
  // description: nothing computed, exit 2 with one line, not an empty result with exit 0.
  const std::string empty = temp_store("tta-empty");
  Store::open(empty);
  const auto d = testing::run_cli("tta --store " + empty + " --platform tpu-v2-board");
  EXPECT_EQ(d.status, 2) << d.out;
  EXPECT_NE(d.err.find("no emulation results"), std::string::npos) << d.err;
  EXPECT_EQ(std::count(d.err.begin(), d.err.end(), '\n'), 1) << d.err;
  const auto e = testing::run_cli("simulate --validate " + empty);
  EXPECT_EQ(e.status, 2) << e.out;
  EXPECT_NE(e.err.find("nothing to validate"), std::string::npos) << e.err;
  std::remove(empty.c_str());
}

}  // namespace
}  // namespace tb
