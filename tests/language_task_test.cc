// The language task: GCIDE's bytes split into training and validation text, a gpt config
// trained on them to a validation loss with and without emulated formats, and its errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <limits>

#include "base/errors.h"
#include "emulation/descriptor.h"
#include "emulation/emulate.h"
#include "emulation/gzip_file.h"
#include "emulation/language_training.h"
#include "emulation/text_corpus.h"
#include "emulation/to_target.h"
#include "record/emulation.h"

namespace tb::emu {
namespace {

bool have_gcide() { return bool(std::ifstream(kGcidePath)); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Emulation, GcideSplitsIntoInterleavedBlocksOfBytes) {
  if (!have_gcide()) GTEST_SKIP() << "dict-gcide not installed";
  const TextCorpus c = load_text_corpus("gcide");
  const std::vector<uint8_t> raw = read_gzip(kGcidePath, "");
  const int64_t n = int64_t(raw.size());
  EXPECT_GT(n, 30'000'000);  // the whole dictionary, not a header
  EXPECT_EQ(c.train.size(0) + c.validation.size(0), n);
  EXPECT_NEAR(double(c.validation.size(0)) / double(n), 1.0 / kValidationEvery, 0.001);
  // Block 19 is the first held out; blocks 0..18 open the training text.
  for (int64_t i : {int64_t(0), kCorpusBlock - 1}) {
    EXPECT_EQ(c.validation[i].item<int64_t>(), raw[size_t(19 * kCorpusBlock + i)]);
    EXPECT_EQ(c.train[i].item<int64_t>(), raw[size_t(i)]);
  }
  EXPECT_EQ(c.train[19 * kCorpusBlock].item<int64_t>(), raw[size_t(20 * kCorpusBlock)]);
  EXPECT_GE(c.train.min().item<int64_t>(), 0);
  EXPECT_LE(c.train.max().item<int64_t>(), 255);
  // The held-out windows: the same every time, the first at 0, the last at the end.
  const auto w = evenly_spaced_windows(c.validation, 8, 16);
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{8, 17}));
  EXPECT_TRUE(w[0].equal(c.validation.slice(0, 0, 17)));
  EXPECT_TRUE(w[7].equal(c.validation.slice(0, c.validation.size(0) - 17)));
  EXPECT_TRUE(w.equal(evenly_spaced_windows(c.validation, 8, 16)));
  EXPECT_NE(message_of([] { load_text_corpus("wikitext"); }).find("'wikitext'"), std::string::npos);
  EXPECT_NE(message_of([] {
              load_text_corpus("gcide", "/nonexistent/gcide.dict.dz");
            }).find("apt-get install dict-gcide"),
            std::string::npos);
}

EmulationOptions tiny() {
  EmulationOptions o;
  o.dataset = "gcide";
  o.model = "gpt:layers=1,d_model=32,heads=2,kv_heads=2,ff=64,seq=16,vocab=256";
  o.batch = 16;
  o.lr = 3e-3;
  o.target_loss = 3.0;
  o.eval_every = 10;
  o.eval_examples = 40;  // two batches of 16 and a last one of 8
  o.max_iters = 300;
  o.seeds = 1;
  return o;
}

TEST(Emulation, TheLanguageTaskTrainsAGptToAValidationLoss) {
  if (!have_gcide()) GTEST_SKIP() << "dict-gcide not installed";
  const EmulationOptions o = tiny();
  const auto plain = emulate(o, {});
  ASSERT_TRUE(plain.runs[0].iterations.has_value()) << *plain.runs[0].best_loss;
  EXPECT_LE(plain.runs[0].curve.back().second, 3.0);
  EXPECT_GT(plain.runs[0].curve.front().second, 3.0);  // from ln 256 = 5.5 at the start
  EXPECT_EQ(*plain.runs[0].best_loss, plain.runs[0].curve.back().second);
  EXPECT_EQ(plain.options.model,
            "gpt:layers=1,d_model=32,heads=2,kv_heads=2,ff=64,act=gelu,norm=layernorm,pos=learned,"
            "positions=16,seq=16,vocab=256,tied=on,bias=on,experts=1,top_k=1,capacity=1.25,aux_"
            "loss=0.01,recompute=none,zero=0,batch=16,dtype=fp32,optimizer=adamw,threads=0,"
            "device=cpu");
  EXPECT_EQ(emulate(o, {}).runs[0].curve, plain.runs[0].curve);  // reproducible
  // A scaled FP8 recipe changes the training, reaches the target, and counts its rounding.
  Policy fp8;
  fp8.weights = fp8.activations = QuantPoint::parse("e4m3@current");
  fp8.errors = QuantPoint::parse("e5m2@current");
  const auto scaled = emulate(o, fp8);
  EXPECT_TRUE(scaled.runs[0].iterations.has_value()) << *scaled.runs[0].best_loss;
  EXPECT_NE(scaled.runs[0].curve, plain.runs[0].curve);
  ASSERT_FALSE(scaled.runs[0].scaling.empty());
  EXPECT_GT(scaled.runs[0].scaling[0].values, 0u);
  // A format too coarse to train stays far from the target: the points are applied.
  Policy coarse;
  coarse.weights = QuantPoint::parse("fixed:w=2,f=0");
  EmulationOptions short_run = o;
  short_run.max_iters = 60;
  const auto bad = emulate(short_run, coarse);
  EXPECT_FALSE(bad.runs[0].iterations.has_value());
  // The variant is described as a loss target on the language task, its cost as the gpt config.
  const auto d = variant_descriptor(plain.options, {});
  EXPECT_EQ(d["metric"], "loss");
  EXPECT_EQ(d["dataset"], "gcide");
  EXPECT_EQ(d["target"], 3.0);
  EXPECT_EQ(d["cost_config"], plain.options.model);
}

// A loss that is not finite has diverged: the run stops there, not reached, with no best loss.
TEST(Emulation, ARunWhoseLossDivergesStopsAsNotReached) {
  EmulationOptions o = tiny();
  o.eval_every = 5;
  Learner learner;
  int steps = 0, evaluations = 0;
  const auto r = run_to_target(
      o, 1, learner, [&] { ++steps; },
      [&] { return ++evaluations < 3 ? 4.0 : std::numeric_limits<double>::quiet_NaN(); }, {});
  EXPECT_FALSE(r.iterations.has_value());
  EXPECT_EQ(steps, 15);
  EXPECT_EQ(r.curve.size(), 3u);
  EXPECT_EQ(*r.best_loss, 4.0);
  EXPECT_TRUE(r.loss_target);
  EXPECT_EQ(to_json(r)["best_loss"], 4.0);
  EmulationOptions acc;  // and an accuracy target reached from below
  acc.eval_every = 2;
  acc.target = 0.5;
  int n = 0;
  const auto a = run_to_target(
      acc, 1, learner, [] {}, [&] { return 0.3 * ++n; }, {});
  EXPECT_EQ(*a.iterations, 4);
  EXPECT_DOUBLE_EQ(a.best_accuracy, 0.6);
  EXPECT_FALSE(to_json(a).contains("best_loss"));
}

// What rounding did is counted on the step before each evaluation by default, on every N-th
// step with count_every, one sample per counted step; counting is off on every other step.
TEST(Emulation, CountedStepsAreTheEvaluationsOrEveryNth) {
  for (const int64_t every : {int64_t(0), int64_t(1), int64_t(3)}) {
    EmulationOptions o;
    o.eval_every = 4;
    o.max_iters = 10;
    o.count_every = every;
    Learner learner;
    bool counting = false;
    int64_t it = 0;
    std::vector<int64_t> counted, taken;
    learner.count = [&](bool on) { counting = on; };
    learner.scaling = [&](int64_t at) {
      taken.push_back(at);
      ScalingSample s;
      s.point = "a";
      s.iteration = at;
      return std::vector<ScalingSample>{s};
    };
    const auto r = run_to_target(
        o, 1, learner,
        [&] {
          ++it;
          if (counting) counted.push_back(it);
        },
        [] { return 0.0; }, {});
    const std::vector<int64_t> want = every == 0 ? std::vector<int64_t>{4, 8, 10}
                                      : every == 1
                                          ? std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
                                          : std::vector<int64_t>{3, 6, 9};
    EXPECT_EQ(counted, want) << every;
    EXPECT_EQ(taken, want) << every;
    ASSERT_EQ(r.scaling.size(), want.size()) << every;
    EXPECT_EQ(r.scaling.back().iteration, want.back()) << every;
    EXPECT_EQ(r.curve.size(), 3u) << every;  // evaluations at 4, 8 and the last, 10
  }
  EmulationOptions bad;
  bad.count_every = -1;
  EXPECT_NE(message_of([&] { emulate(bad, {}); }).find("count-every -1"), std::string::npos);
}

TEST(Emulation, TheLanguageTaskRejectsWhatDoesNotFit) {
  EmulationOptions o = tiny();
  o.target_loss = -1;
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("target-loss -1"), std::string::npos);
  o = tiny();
  o.target_loss = 0;  // no default for a model other than the default one
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("needs --target-loss"), std::string::npos);
  o = tiny();
  o.model = "fc:layers=1,nodes=64,input=784,output=10";
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("trains the gpt family"), std::string::npos);
  o = tiny();
  o.model = "gpt:layers=1,d_model=32,heads=2,seq=16,vocab=512";
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("vocab=512"), std::string::npos);
  o = tiny();
  o.dataset = "imagenet";
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("dataset 'imagenet'"), std::string::npos);
  o = EmulationOptions();
  o.target_loss = 2;  // Fashion-MNIST has an accuracy target
  EXPECT_NE(message_of([&] { emulate(o, {}); }).find("--dataset gcide"), std::string::npos);
}

TEST(Emulation, TheDefaultLanguageModelHasADefaultTarget) {
  if (!have_gcide()) GTEST_SKIP() << "dict-gcide not installed";
  EmulationOptions o;
  o.dataset = "gcide";
  o.model = kLanguageModel;
  o.max_iters = 1;
  o.seeds = 1;
  const auto r = emulate(o, {});
  EXPECT_EQ(r.options.target_loss, kLanguageTargetLoss);
  EXPECT_EQ(r.options.lr, kLanguageLr);
  EXPECT_EQ(r.options.eval_examples, kLanguageEvalWindows);
  EXPECT_EQ(r.runs[0].curve.size(), 1u);
}

}  // namespace
}  // namespace tb::emu
