// The one metric table (record/metrics.h) against the three places produced from it: the JSON
// of a result, the store's run table and the analyses' metric list.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "analysis/runs.h"
#include "record/json.h"
#include "record/metrics.h"
#include "store/store.h"

namespace tb {
namespace {

// A finished run with a distinct value in every measured field, so a metric read from the
// wrong field shows.
RunResult a_result() {
  RunResult r;
  r.config = "fc:layers=2,nodes=64,input=32,output=8,batch=16";
  r.family = "fc";
  r.status = Status::kOk;
  r.cost.source = "analytic";
  r.cost.params = 4680;
  r.cost.fwd_flops = 1.5e5;
  r.cost.bytes = 2.5e4;
  r.cost.model_flops.total = 4.2e5;
  r.steps.mean = 0.011;
  r.steps.median = 0.012;
  r.steps.p5 = 0.009;
  r.steps.p95 = 0.015;
  r.steps.min = 0.008;
  r.steps.max = 0.016;
  r.steps.stddev = 0.0013;
  r.steps.cv = 0.14;
  r.steps.ci.mean = 0.011;
  r.steps.ci.half_width = 0.0004;
  r.steps.ci.batches = 7;
  r.steps.samples = 33;
  r.steps.warmup = 5;
  r.steps.steps = 38;
  r.steps.stationary = true;
  r.steps.end_reason = "converged";
  r.steps.wall_s = 0.41;
  r.examples_per_step = 16;
  r.examples_per_s = 1454.5;
  r.units_per_step = 16;
  r.units_per_s = 1454.5;
  r.achieved_flops = 3.1e7;
  r.peak_flops = 6.2e10;
  r.flops_utilization = 5e-4;
  r.cpu.process = 0.93;
  r.cpu.system = 0.97;
  r.cpu.per_core = {0.9, 0.96};
  return r;
}

TEST(MetricsTable, NamesAndPathsAreUniqueAndAnalysableMetricsAreStoredNumbers) {
  std::set<std::string> columns, paths;
  for (const Metric& m : metric_table()) {
    std::string path;
    for (const auto& k : m.path) path += "/" + k;
    EXPECT_TRUE(paths.insert(path).second) << "two metrics at " << path;
    if (m.stored()) {
      EXPECT_TRUE(columns.insert(m.column).second) << "two metrics named " << m.column;
      EXPECT_TRUE(m.sql_type == "REAL" || m.sql_type == "INTEGER" || m.sql_type == "TEXT")
          << m.column << ": " << m.sql_type;
    }
    if (!m.label.empty()) {
      EXPECT_TRUE(m.stored() && m.numeric()) << path << " is offered to analyses but not stored";
      EXPECT_FALSE(m.unit.empty()) << m.column << " has a label but no unit";
    }
  }
  // The analyses offer exactly the labelled rows, under their column names.
  std::set<std::string> offered;
  for (const auto& i : metric_infos()) offered.insert(i.name);
  std::set<std::string> labelled;
  for (const Metric& m : metric_table())
    if (m.analysable()) labelled.insert(m.column);
  EXPECT_EQ(offered, labelled);
  EXPECT_EQ(metric_info("step_mean_s").higher_is_better, false);
}

TEST(MetricsTable, EveryMetricWithAValueIsInTheJsonAtItsPath) {
  const RunResult r = a_result();
  const nlohmann::json j = to_json(r, false);
  for (const Metric& m : metric_table()) {
    if (!m.value) continue;
    const nlohmann::json* v = metric_value(j, m);
    if (m.value(r).is_null()) {  // a metric the run has none of is written as null
      EXPECT_EQ(v, nullptr) << m.path.back();
      continue;
    }
    ASSERT_NE(v, nullptr) << m.path.back() << " missing from the result's JSON";
    EXPECT_EQ(*v, m.value(r)) << m.path.back();
  }
  EXPECT_EQ(j["timing"]["mean_s"], 0.011);
  EXPECT_EQ(j["metrics"]["cpu_utilization_process"], 0.93);
  EXPECT_DOUBLE_EQ(j["metrics"]["mfu"].get<double>(), 4.2e5 / 0.011 / 6.2e10);
  EXPECT_TRUE(to_json(RunResult{}, false)["cost"].is_object());
  // A run that did not finish has no timing or metrics at all.
  RunResult failed = r;
  failed.status = Status::kOom;
  const nlohmann::json f = to_json(failed, false);
  EXPECT_FALSE(f.contains("timing"));
  EXPECT_FALSE(f.contains("metrics"));
}

TEST(MetricsTable, TheStoreKeepsEveryStoredMetricAndTheAnalysesReadIt) {
  std::string dir = ::testing::TempDir() + "/tb_metrics_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/m.db";
  const RunResult r = a_result();
  const nlohmann::json j = to_json(r, false);
  {
    auto store = Store::open(path);
    const int64_t platform = store->platform_id({{"host", "test"}}, "test", nullptr);
    const int64_t stack = store->stack_id({{"trainbench_version", "test"}});
    store->add_run(j, platform, stack, "test", false);
    const auto rows = store->runs();
    ASSERT_EQ(rows.size(), 1u);
    for (const Metric& m : metric_table()) {
      if (!m.stored()) continue;
      ASSERT_TRUE(rows[0].contains(m.column)) << "no column " << m.column;
      const nlohmann::json* v = metric_value(j, m);
      if (!v) {
        EXPECT_TRUE(rows[0][m.column].is_null()) << m.column;
        continue;
      }
      if (v->is_boolean())
        EXPECT_EQ(rows[0][m.column], int64_t(v->get<bool>())) << m.column;
      else if (v->is_string())
        EXPECT_EQ(rows[0][m.column], *v) << m.column;
      else
        EXPECT_DOUBLE_EQ(rows[0][m.column].get<double>(), v->get<double>()) << m.column;
    }
  }
  const RunSet runs = load_runs({path});
  ASSERT_EQ(runs.runs.size(), 1u);
  for (const auto& i : metric_infos()) {
    const Metric* m = nullptr;
    for (const Metric& t : metric_table())
      if (t.column == i.name) m = &t;
    ASSERT_NE(m, nullptr);
    if (const nlohmann::json* v = metric_value(j, *m))
      EXPECT_DOUBLE_EQ(runs.runs[0].metric(i.name), v->get<double>()) << i.name;
  }
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace tb
