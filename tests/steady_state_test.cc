#include "runner/steady_state.h"

#include <gtest/gtest.h>

#include <random>

namespace tb {
namespace {

// `warmup` steps decaying linearly from `slow` to `fast`, then `steady` steps at `fast`.
std::vector<double> series(int warmup, int steady, double slow, double fast, double noise,
                           unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, noise);
  std::vector<double> x;
  for (int i = 0; i < warmup; ++i) x.push_back(slow + (fast - slow) * i / warmup + n(rng));
  for (int i = 0; i < steady; ++i) x.push_back(fast + n(rng));
  return x;
}

TEST(SteadyState, MserFindsTheEndOfWarmup) {
  const auto x = series(40, 400, 2.0, 1.0, 0.02, 1);
  const int64_t d = mser5_truncation(x);
  EXPECT_GE(d, 30);  // the last warm-up steps are within noise of the steady value
  EXPECT_LE(d, 45);
}

TEST(SteadyState, MserKeepsAStationarySeries) {
  EXPECT_LE(mser5_truncation(series(0, 400, 0, 1.0, 0.02, 2)), 400 / 2);
}

TEST(SteadyState, IntervalMatchesStudentT) {
  // 5 samples: mean 3, sd sqrt(2.5); t(0.975, 4) = 2.776445
  const Interval ci = mean_interval({1, 2, 3, 4, 5}, 0.95);
  EXPECT_DOUBLE_EQ(ci.mean, 3);
  EXPECT_NEAR(ci.half_width, 2.776445 * std::sqrt(2.5) / std::sqrt(5.0), 1e-5);
  EXPECT_EQ(ci.batches, 1);
}

TEST(SteadyState, IntervalCoversTheTrueMean) {
  int covered = 0;
  for (unsigned s = 0; s < 200; ++s) {
    const Interval ci = mean_interval(series(0, 100, 0, 1.0, 0.1, 100 + s), 0.95);
    covered += std::fabs(ci.mean - 1.0) <= ci.half_width;
  }
  EXPECT_GE(covered, 180);  // nominal 95% of 200 = 190
}

TEST(SteadyState, SummaryPercentiles) {
  std::vector<double> x = {9.0};  // one warm-up step, then 1..100
  for (int i = 1; i <= 100; ++i) x.push_back(i);
  const StepStats s = summarize(x, 1, 0.95);
  EXPECT_EQ(s.samples, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_NEAR(s.p5, 5.95, 1e-9);
  EXPECT_NEAR(s.p95, 95.05, 1e-9);
  EXPECT_DOUBLE_EQ(s.min, 1);
}

TEST(SteadyState, MonitorStopsWhenPreciseAndDropsWarmup) {
  SteadyStateMonitor m({0.01, 0.95, 1e9, 10, 0, 0});
  const auto x = series(30, 100000, 5.0, 1.0, 0.02, 3);
  size_t i = 0;
  while (!m.add(x[i], double(i))) ++i;
  const StepStats s = m.result();
  EXPECT_EQ(s.end_reason, "converged");
  EXPECT_TRUE(s.stationary);
  EXPECT_GE(s.warmup, 20);
  EXPECT_LT(s.steps, 1000);
  EXPECT_NEAR(s.mean, 1.0, 0.01);
  EXPECT_LE(s.ci.relative(), 0.01);
}

TEST(SteadyState, MonitorReportsBudgetWhenNoisy) {
  SteadyStateMonitor m({0.0001, 0.95, 50, 10, 0, 0});  // unreachable precision
  const auto x = series(0, 1000, 0, 1.0, 0.3, 4);
  size_t i = 0;
  while (!m.add(x[i], double(i))) ++i;
  EXPECT_EQ(m.result().end_reason, "budget");
  EXPECT_EQ(m.result().steps, 51);
}

TEST(SteadyState, MonitorDoesNotConvergeOnADrift) {
  SteadyStateMonitor m({0.01, 0.95, 500, 10, 0, 0});
  std::mt19937 rng(6);
  std::normal_distribution<double> n(0, 0.002);
  size_t i = 0;
  while (!m.add(1.0 + 0.002 * i + n(rng), double(i))) ++i;  // slows 0.2% per step
  EXPECT_EQ(m.result().end_reason, "budget");
}

// A precise, stationary window that is too short in wall time is not accepted: it could lie
// wholly inside a slow spell of the machine. Steps of 1 ms reach +-1% within ~30 steps, but
// 0.5 s of stationary steps needs ~500.
TEST(SteadyState, MonitorWaitsForTheMinimumWindow) {
  SteadyStateOptions o;
  o.budget_s = 30;
  o.min_time_s = 0.5;
  SteadyStateMonitor m(o);
  const auto x = series(10, 100000, 0.005, 0.001, 0.00002, 7);
  size_t i = 0;
  double t = 0;
  while (!m.add(x[i], t += x[i])) ++i;
  const StepStats s = m.result();
  EXPECT_EQ(s.end_reason, "converged");
  EXPECT_GE(double(s.samples) * s.mean, 0.5);
  EXPECT_LT(double(s.samples) * s.mean, 0.5 * 1.2);  // checks are 10% apart

  o.min_time_s = 0;  // the same series without the minimum stops far earlier
  SteadyStateMonitor quick(o);
  i = 0, t = 0;
  while (!quick.add(x[i], t += x[i])) ++i;
  EXPECT_LT(quick.result().steps, 100);

  o.min_time_s = 10, o.budget_s = 0.2;  // capped at half the budget, so it still converges
  SteadyStateMonitor capped(o);
  i = 0, t = 0;
  while (!capped.add(x[i], t += x[i])) ++i;
  EXPECT_EQ(capped.result().end_reason, "converged");
}

TEST(SteadyState, FixedStepsRunsExactly) {
  SteadyStateMonitor m({0.01, 0.95, 1e9, 10, 0, 37});
  const auto x = series(0, 100, 0, 1.0, 0.0, 5);
  size_t i = 0;
  while (!m.add(x[i], 0)) ++i;
  EXPECT_EQ(m.result().steps, 37);
  EXPECT_EQ(m.result().end_reason, "fixed-steps");
}

}  // namespace
}  // namespace tb
