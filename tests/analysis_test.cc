#include "analysis/analysis.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "analysis/scaling.h"
#include "analysis/summary.h"

namespace tb {
namespace {

TEST(Analysis, RegressionRecoversKnownCoefficients) {
  // metric = 3 + 2*z(layers) - 1.5*z(log2 batch) + noise, on a grid like ParaDnn's.
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<Sample> s;
  std::vector<double> layers, lb;
  for (double l : {4, 8, 12, 16})
    for (double b = 64; b <= 16384; b *= 2) layers.push_back(l), lb.push_back(std::log2(b));
  auto z = [](const std::vector<double>& v, double x) {
    double m = 0, ss = 0;
    for (double e : v) m += e;
    m /= v.size();
    for (double e : v) ss += (e - m) * (e - m);
    return (x - m) / std::sqrt(ss / v.size());
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    const double y = 3 + 2 * z(layers, layers[i]) - 1.5 * z(lb, lb[i]) + noise(rng);
    s.push_back({"c" + std::to_string(i), {{"layers", layers[i]}, {"batch", std::exp2(lb[i])}}, y});
  }
  const Regression r = sensitivity(s, {"layers", "batch"});
  EXPECT_FALSE(r.log2_scaled[0]);  // 4..16 spans less than 8x
  EXPECT_TRUE(r.log2_scaled[1]);
  EXPECT_NEAR(r.weights[0], 2.0, 0.02);
  EXPECT_NEAR(r.weights[1], -1.5, 0.02);
  EXPECT_NEAR(r.intercept, 3.0, 0.01);
  EXPECT_GT(r.r2, 0.999);
  const Regression q = sensitivity(s, {"layers", "batch"}, true);
  EXPECT_EQ(q.terms.size(), 5u);
  EXPECT_NEAR(q.weights[0], 2.0, 0.05);
  EXPECT_THROW(sensitivity({s[0], s[1]}, {"layers", "batch"}), std::invalid_argument);
}

TEST(Analysis, PercentilesMatchADirectComputation) {
  std::vector<double> v;
  for (int i = 0; i <= 100; ++i) v.push_back(100 - i);  // 100..0, unsorted input
  const BoxStats b = box_stats(v);
  EXPECT_DOUBLE_EQ(b.p2, 2);
  EXPECT_DOUBLE_EQ(b.p9, 9);
  EXPECT_DOUBLE_EQ(b.p50, 50);
  EXPECT_DOUBLE_EQ(b.p91, 91);
  EXPECT_DOUBLE_EQ(b.p98, 98);
  EXPECT_EQ(b.outliers, (std::vector<double>{0, 1, 99, 100}));
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  // The whiskers are observed values: a box of few runs has them at its extremes, and no
  // outliers (interpolated, 2 of 4 runs were).
  const BoxStats few = box_stats({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(few.p2, 1);
  EXPECT_DOUBLE_EQ(few.p98, 4);
  EXPECT_TRUE(few.outliers.empty());
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 2), 1.06);
}

TEST(Analysis, SpeedupsOnlyOnConfigsPresentOnBothSides) {
  const Comparison c =
      compare({{"x", 10}, {"y", 10}, {"only-a", 5}}, {{"x", 20}, {"y", 5}, {"only-b", 7}});
  ASSERT_EQ(c.matched.size(), 2u);
  EXPECT_EQ(c.only_a, 1u);
  EXPECT_EQ(c.only_b, 1u);
  EXPECT_DOUBLE_EQ(c.geomean, 1.0);  // sqrt(2 * 0.5)
  EXPECT_DOUBLE_EQ(c.share_b_faster, 0.5);
}

TEST(Analysis, AmdahlFractionFromScaling) {
  const double s = 0.1;
  std::map<int, double> t;
  for (int n : {1, 2, 4, 8}) t[n] = 100.0 / (s + (1 - s) / n);
  EXPECT_NEAR(amdahl_serial_fraction(t), 0.1, 1e-12);
}

// Runs stopped by their time budget: the median interval is over those that have one, and a
// run of one timed step (no interval) is counted apart, not left out unseen.
TEST(Analysis, BudgetLimitedRunsWithoutAnIntervalAreCountedApart) {
  RunSet runs;
  for (const auto& [config, ci] :
       std::vector<std::pair<std::string, double>>{{"fc:layers=1", 0.012}, {"fc:layers=2", NAN}}) {
    ::tb::Run r;
    r.family = "fc";
    r.status = "ok";
    r.config = config;
    r.end_reason = "budget";
    if (std::isfinite(ci)) r.metrics["ci95_relative"] = ci;
    runs.runs.push_back(r);
  }
  std::string text;
  Summary none;
  none.metric = "examples_per_s";
  for (const auto& o : observe(runs, none))
    if (o.text.find("time budget") != std::string::npos) text = o.text;
  EXPECT_NE(text.find("2 of 2 measured runs reached their time budget"), std::string::npos) << text;
  EXPECT_NE(text.find("the 1 with an interval have a median 95% interval of \u00b11.2%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 timed one step only and has no interval at all"), std::string::npos)
      << text;
}

// A series that slows down as it grows (2 threads at 0.16x of one) has no Amdahl fraction:
// the fit (11.7) is above 1, which the clamp printed as 1.000, a series that does not change.
TEST(Analysis, ASlowdownHasNoAmdahlFractionButSaysWhy) {
  EXPECT_NEAR(amdahl_serial_fraction({{1, 100.0}, {2, 16.0}}), (100.0 / 16 - 0.5) / 0.5, 1e-12);
  RunSet runs;
  for (const auto& [threads, rate] : std::vector<std::pair<int, double>>{{1, 100}, {2, 16}}) {
    ::tb::Run r;
    r.family = "fc";
    r.status = "ok";
    r.config = fmt::format("fc:layers=1,nodes=8,threads={}", threads);
    r.params = {{"layers", "1"}, {"nodes", "8"}, {"threads", std::to_string(threads)}};
    r.metrics["examples_per_s"] = rate;
    runs.runs.push_back(r);
  }
  const auto series = scaling(runs);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_TRUE(std::isnan(series[0].serial_fraction));
  EXPECT_NE(series[0].amdahl_note.find("slower with more threads than with one"), std::string::npos)
      << series[0].amdahl_note;
}

// Profiles with model parts (gpt): the observation names the seq at which the attention
// scores' time passes the MLP's, per d_model.
TEST(Analysis, ObservesWhereAttentionOvertakesTheMlp) {
  RunSet runs;
  auto profile = [&](int64_t d_model, int64_t seq, double attention_us, double mlp_us) {
    ProfileRow row;
    row.platform = "host";
    row.profile.config = fmt::format("gpt:layers=2,d_model={},heads=4,seq={}", d_model, seq);
    for (const auto& [part, us] : {std::pair<const char*, double>{"attention_scores", attention_us},
                                   {"mlp", mlp_us},
                                   {"projections", 5.0}}) {
      OpStats op;
      op.name = "aten::mm";
      op.part = part;
      op.self_us = us;
      row.profile.ops.push_back(op);
    }
    runs.profiles.push_back(row);
  };
  profile(64, 512, 30, 20);  // listed out of order: sorted by seq
  profile(64, 128, 5, 20);
  profile(64, 256, 10, 20);
  profile(64, 256, 15, 20);  // another variant: the median of 0.5 and 0.75
  profile(128, 128, 4, 40);
  profile(128, 256, 9, 40);
  const Summary s = summarize(runs);
  std::vector<std::string> found;
  for (const auto& o : s.observations)
    if (o.text.find("attention scores") != std::string::npos) found.push_back(o.text);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0],
            "On host, gpt d_model=64: the attention scores' time (forward and backward, profiled) "
            "over the MLP's is 0.25x at seq=128, 0.62x at seq=256, 1.50x at seq=512 (median of "
            "up to 2 variants): the attention scores overtake the MLP between seq=256 and "
            "seq=512");
  EXPECT_EQ(found[1],
            "On host, gpt d_model=128: the attention scores' time (forward and backward, "
            "profiled) over the MLP's is 0.10x at seq=128, 0.23x at seq=256: the MLP takes "
            "longer at every profiled seq");
}

}  // namespace
}  // namespace tb
