// Repetitions in fresh processes (record/repetitions.h, runner/repeat.h, sweep): the
// combination of per-process results, the unstable flag, and the CLI and store around them.
#include "record/repetitions.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "report/run_table.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "support/cli.h"

namespace {

using nlohmann::json;

// A result as `trainbench run --json` prints it, with the fields the combination reads.
json process_result(double mean, double ci_rel, double examples_per_step = 64) {
  json r = {{"config", "fc:layers=1,nodes=16,input=32,output=4,batch=64,threads=1"},
            {"status", "ok"},
            {"started_at", "t"},
            {"finished_at", "t"},
            {"cost", {{"flops_per_step", 1e6}}},
            {"timing",
             {{"mean_s", mean},
              {"median_s", mean},
              {"ci95_relative", ci_rel},
              {"ci95_half_width_s", ci_rel * mean},
              {"end_reason", "converged"}}},
            {"step_times_s", {mean, mean}},
            {"metrics",
             {{"examples_per_step", examples_per_step},
              {"examples_per_s", examples_per_step / mean},
              {"units_per_step", examples_per_step},
              {"achieved_flops", 1e6 / mean},
              {"peak_flops", 1e9},
              {"cpu_utilization_process", 0.5},
              {"cpu_utilization_system", 0.5},
              {"cpu_utilization_per_core", json::array()}}}};
  tb::mark_single_process(r);
  return r;
}

json combine(const std::vector<std::pair<double, double>>& processes) {
  json r;
  for (const auto& [mean, ci] : processes) r = tb::add_repetition(r, process_result(mean, ci));
  return r;
}

TEST(Repetitions, HeadlineIsTheMedianOfTheProcessMeansAndMetricsFollowIt) {
  const json r = combine({{2e-3, 0.01}, {1e-3, 0.01}, {1.02e-3, 0.01}});
  EXPECT_EQ(r["repetitions"]["count"], 3);
  EXPECT_DOUBLE_EQ(r["timing"]["mean_s"].get<double>(), 1.02e-3);
  EXPECT_DOUBLE_EQ(r["metrics"]["examples_per_s"].get<double>(), 64 / 1.02e-3);
  EXPECT_DOUBLE_EQ(r["metrics"]["achieved_flops"].get<double>(), 1e6 / 1.02e-3);
  EXPECT_DOUBLE_EQ(r["metrics"]["flops_utilization"].get<double>(), 1e6 / 1.02e-3 / 1e9);
  const json& b = r["repetitions"]["between_processes"];
  EXPECT_DOUBLE_EQ(b["min_s"].get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(b["max_s"].get<double>(), 2e-3);
  EXPECT_DOUBLE_EQ(b["max_over_min"].get<double>(), 2.0);
  // Student's t with 2 degrees of freedom over the three means.
  const double mean = (2e-3 + 1e-3 + 1.02e-3) / 3;
  double ss = 0;
  for (double v : {2e-3, 1e-3, 1.02e-3}) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / 2);
  EXPECT_NEAR(b["cv"].get<double>(), sd / mean, 1e-12);
  EXPECT_NEAR(b["ci95_half_width_s"].get<double>(), 4.302652729911275 * sd / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(r["repetitions"]["runs"].size(), 3u);  // every process kept
  EXPECT_TRUE(r["unstable"].get<bool>());
}

// In one process: a run's round trip before its timed loop against the context's after the
// runs. Twice the other either way names the run; within that, or without either figure, nothing.
TEST(Repetitions, ARunWhoseThreadsMovedIsNamedUnderTheContext) {
  tb::RunResult moved, stayed, one_thread;
  moved.config = "fc:layers=4,threads=2";
  moved.core_round_trip_ns = 505;
  stayed.config = "fc:layers=2,threads=2";
  stayed.core_round_trip_ns = 130;
  one_thread.config = "fc:layers=1,threads=1";
  tb::Context c;
  c.core_round_trip = tb::CoreRoundTrip{0, 1, 118};
  const std::string note = tb::placement_moved({moved, stayed, one_thread}, c);
  EXPECT_NE(note.find("placement fc:layers=4,threads=2: CPU round trip 505 ns before its timed "
                      "loop, 118 ns after the runs: the host moved the threads"),
            std::string::npos)
      << note;
  EXPECT_EQ(note.find("layers=2"), std::string::npos) << note;
  EXPECT_EQ(note.find("layers=1"), std::string::npos) << note;
  c.core_round_trip = tb::CoreRoundTrip{0, 1, 1010};  // slower after: named too
  EXPECT_NE(tb::placement_moved({moved}, c).find("505 ns before"), std::string::npos);
  c.core_round_trip.reset();  // one CPU: no figure to compare
  EXPECT_EQ(tb::placement_moved({moved}, c), "");
}

TEST(Repetitions, EachProcessKeepsItsCpuRoundTripAndTwoPlacementsAreNamed) {
  // Three processes of a two-thread config: two on CPUs sharing a cache, one two chiplets
  // apart, which ran 1.6x slower (the two levels seen on 2-vCPU EPYC VMs).
  json r;
  for (const auto& [mean, ns] :
       std::vector<std::pair<double, double>>{{0.47e-3, 118}, {0.77e-3, 505}, {0.48e-3, 110}}) {
    json p = process_result(mean, 0.005);
    p["metrics"]["core_round_trip_ns"] = ns;
    r = tb::add_repetition(r, p);
  }
  ASSERT_EQ(r["repetitions"]["runs"].size(), 3u);
  EXPECT_EQ(r["repetitions"]["runs"][1]["core_round_trip_ns"], 505);
  // The headline's metrics are the median process's (0.48 ms), as its timing block is.
  EXPECT_EQ(r["metrics"]["core_round_trip_ns"], 110);
  ASSERT_TRUE(r["unstable"].get<bool>());
  const std::string table = tb::format_repeated(r);
  EXPECT_NE(
      table.find("placement one cache line between two of its CPUs and back: 118, 505, 110 ns"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("their CPU round trips range 110-505 ns: the host placed their threads "
                       "differently"),
            std::string::npos)
      << table;

  // The same spread at one placement says nothing about placement; without round trips (one
  // thread, or results stored before they were taken) there is no placement line.
  json same;
  for (const double mean : {0.47e-3, 0.77e-3, 0.48e-3}) {
    json p = process_result(mean, 0.005);
    p["metrics"]["core_round_trip_ns"] = 120;
    same = tb::add_repetition(same, p);
  }
  const std::string one_placement = tb::format_repeated(same);
  EXPECT_NE(one_placement.find("UNSTABLE"), std::string::npos) << one_placement;
  EXPECT_EQ(one_placement.find("placed their threads differently"), std::string::npos);
  const std::string none = tb::format_repeated(combine({{0.47e-3, 0.005}, {0.77e-3, 0.005}}));
  EXPECT_EQ(none.find("placement"), std::string::npos) << none;
  EXPECT_TRUE(combine({{1e-3, 0.01}, {1e-3, 0.01}})["metrics"]["core_round_trip_ns"].is_null());
}

TEST(Repetitions, EvenCountTakesTheLowerMiddleProcessWholeAndKeepsTheTrueMedianBeside) {
  const json r = combine({{1.0e-3, 0.001}, {1.3e-3, 0.002}, {1.1e-3, 0.003}, {1.2e-3, 0.004}});
  EXPECT_DOUBLE_EQ(r["timing"]["mean_s"].get<double>(), 1.1e-3);
  EXPECT_DOUBLE_EQ(r["timing"]["ci95_relative"].get<double>(), 0.003);  // the 1.1 ms process
  EXPECT_DOUBLE_EQ(r["metrics"]["examples_per_s"].get<double>(), 64 / 1.1e-3);
  EXPECT_DOUBLE_EQ(r["repetitions"]["between_processes"]["median_s"].get<double>(), 1.15e-3);
}

// Two processes far apart (an unstable result): the headline is one of them, the faster, so it
// lies within its timing block's own step times; the median of the two (5.5 ms) would not.
TEST(Repetitions, TwoProcessesFarApartGiveAHeadlineInsideItsOwnBlock) {
  json slow = process_result(8e-3, 0.01), fast = process_result(3e-3, 0.01);
  slow["timing"]["min_s"] = 7.9e-3;
  slow["timing"]["max_s"] = 8.2e-3;
  slow["step_times_s"] = {7.9e-3, 8.2e-3};
  fast["timing"]["min_s"] = 2.9e-3;
  fast["timing"]["max_s"] = 3.1e-3;
  fast["step_times_s"] = {2.9e-3, 3.1e-3};
  const json r = tb::add_repetition(tb::add_repetition(json(), slow), fast);
  ASSERT_TRUE(r["unstable"].get<bool>());
  const json& t = r["timing"];
  EXPECT_DOUBLE_EQ(t["mean_s"].get<double>(), 3e-3);
  EXPECT_LE(t["min_s"].get<double>(), t["mean_s"].get<double>());
  EXPECT_GE(t["max_s"].get<double>(), t["mean_s"].get<double>());
  EXPECT_EQ(r["step_times_s"], fast["step_times_s"]);
  EXPECT_DOUBLE_EQ(r["repetitions"]["between_processes"]["median_s"].get<double>(), 5.5e-3);
  EXPECT_DOUBLE_EQ(r["repetitions"]["between_processes"]["max_over_min"].get<double>(), 8.0 / 3);
}

TEST(Repetitions, UnstableNeedsDisjointIntervalsAndMoreThanFivePercent) {
  // 3% apart with tight intervals: they disagree, but not by enough to matter.
  EXPECT_FALSE(tb::repetitions_disagree({1.0, 1.03}, {0.001, 0.001}));
  // 10% apart, intervals overlapping: the processes did not know their means well enough.
  EXPECT_FALSE(tb::repetitions_disagree({1.0, 1.10}, {0.06, 0.06}));
  // 10% apart, disjoint intervals: two modes.
  EXPECT_TRUE(tb::repetitions_disagree({1.0, 1.10}, {0.01, 0.01}));
  // A process with one sample has no interval: nothing can be said against it.
  EXPECT_FALSE(tb::repetitions_disagree({1.0, 2.0}, {0.01, NAN}));
  EXPECT_FALSE(tb::repetitions_disagree({1.0}, {0.0}));
}

TEST(Repetitions, RoundDriftSeparatesWhatEveryConfigSharedFromAConfigsOwnSpread) {
  // Four configs whose second process ran 10% slower, as a slow minute of the machine does,
  // and one that moved the other way on its own; CIs of 0.5%, so all five are unstable.
  const std::vector<json> results = {combine({{1.0e-3, 0.005}, {1.1e-3, 0.005}}),
                                     combine({{2.0e-3, 0.005}, {2.2e-3, 0.005}}),
                                     combine({{3.0e-3, 0.005}, {3.3e-3, 0.005}}),
                                     combine({{4.0e-3, 0.005}, {4.4e-3, 0.005}}),
                                     combine({{1.1e-3, 0.005}, {1.0e-3, 0.005}}),
                                     combine({{1.0e-3, 0.005}}),  // one process: not in every round
                                     json{{"status", "crashed"}}};
  for (size_t i = 0; i < 5; ++i) ASSERT_TRUE(results[i]["unstable"].get<bool>()) << i;
  const tb::RoundDrift d = tb::round_drift(results, 2);
  ASSERT_EQ(d.rounds.size(), 2u);
  // Each config's processes over their median (1.05 of the first): 1/1.05 and 1.1/1.05, the
  // fifth the other way round; a round's shift is the median over the five.
  EXPECT_EQ(d.rounds[0].round, 1);
  EXPECT_EQ(d.rounds[0].configs, 5u);
  EXPECT_EQ(d.rounds[1].configs, 5u);
  EXPECT_NEAR(d.rounds[0].median, 1.0 / 1.05, 1e-12);
  EXPECT_NEAR(d.rounds[1].median, 1.1 / 1.05, 1e-12);
  EXPECT_NEAR(d.rounds[0].max, 1.1 / 1.05, 1e-12);
  EXPECT_NEAR(d.rounds[1].min, 1.0 / 1.05, 1e-12);
  // Divided by the shift over the other configs, the four that moved with their round agree;
  // the fifth, which moved against it, disagrees the more.
  EXPECT_EQ(d.unstable, 5u);
  EXPECT_EQ(d.unstable_within_drift, 4u);
  // Fewer than two configs with a process in every round: no rounds to speak of.
  EXPECT_TRUE(tb::round_drift({results[0], results[5]}, 2).rounds.empty());
  EXPECT_TRUE(tb::round_drift(results, 1).rounds.empty());
}

TEST(Repetitions, RoundDriftTakesEachConfigsFirstRoundsOnly) {
  // A stored result with a third process (an earlier, longer sweep) counts with its first
  // two; one with fewer than the rounds asked for is left out rather than thinning a round.
  const std::vector<json> results = {combine({{1.0e-3, 0.005}, {1.1e-3, 0.005}, {5.0e-3, 0.005}}),
                                     combine({{2.0e-3, 0.005}, {2.2e-3, 0.005}}),
                                     combine({{3.0e-3, 0.005}, {3.3e-3, 0.005}})};
  const tb::RoundDrift two = tb::round_drift(results, 2);
  ASSERT_EQ(two.rounds.size(), 2u);
  EXPECT_EQ(two.rounds[1].configs, 3u);
  // Without the cut the first config's median would be 1.1 ms and its first round 1/1.1.
  EXPECT_NEAR(two.rounds[0].min, 1.0 / 1.05, 1e-12);
  EXPECT_NEAR(two.rounds[1].max, 1.1 / 1.05, 1e-12);
  EXPECT_TRUE(tb::round_drift(results, 3).rounds.empty());  // one config has three
}

TEST(Repetitions, OneProcessSaysTheSpreadWasNotMeasured) {
  const json r = process_result(1e-3, 0.01);
  EXPECT_EQ(r["repetitions"]["count"], 1);
  EXPECT_TRUE(r["repetitions"]["between_processes"].is_null());
  EXPECT_FALSE(r["unstable"].get<bool>());
  EXPECT_EQ(tb::repetition_count(r), 1);
}

TEST(Repetitions, AFailedProcessWinsAndKeepsTheProcessesThatRan) {
  json failed = {{"config", "fc:threads=1"}, {"status", "timeout"}, {"error", "over 60 s"}};
  const json r = tb::add_repetition(combine({{1e-3, 0.01}, {1.01e-3, 0.01}}), failed);
  EXPECT_EQ(r["status"], "timeout");
  EXPECT_EQ(r["repetitions"]["count"], 2);
  EXPECT_EQ(tb::repetition_count(r), 0);
  // Nothing is added to a failed result.
  EXPECT_EQ(tb::add_repetition(r, process_result(1e-3, 0.01))["status"], "timeout");
}

std::string tmp_path(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/tb-rep-" + std::to_string(getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

TEST(RepetitionsCli, RunPrintsEveryProcessAndTheSpread) {
  const auto o = tb::testing::run_cli(
      "run fc:layers=1,nodes=16,input=32,output=4,batch=8,threads=1 --budget 0.2 --target-ci 0.05 "
      "--repetitions 3 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const json doc = json::parse(o.out);
  const json& r = doc["results"][0];
  EXPECT_EQ(r["status"], "ok");
  ASSERT_EQ(r["repetitions"]["count"], 3);
  std::vector<double> means;
  for (const auto& e : r["repetitions"]["runs"]) {
    means.push_back(e["timing"]["mean_s"].get<double>());
    EXPECT_FALSE(e["step_times_s"].empty());
  }
  std::sort(means.begin(), means.end());
  EXPECT_DOUBLE_EQ(r["timing"]["mean_s"].get<double>(), means[1]);
  EXPECT_TRUE(r["repetitions"]["between_processes"].is_object());
  EXPECT_TRUE(r["unstable"].is_boolean());
  // The table says what each process measured.
  const auto t = tb::testing::run_cli(
      "run fc:layers=1,nodes=16,input=32,output=4,batch=8,threads=1 --budget 0.2 --target-ci 0.05 "
      "--repetitions 2");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("(the faster of 2 processes)"), std::string::npos) << t.out;
  // The context's threads are the processes' (two CPUs here: threads=0 is both), not those of
  // the parent, which ran nothing.
  const auto both = tb::testing::run_cli(
      "run fc:layers=1,nodes=16,input=32,output=4,batch=8,threads=2 --budget 0.2 --repetitions 2");
  ASSERT_EQ(both.status, 0) << both.err;
  EXPECT_NE(both.out.find("threads   2 intra-op"), std::string::npos) << both.out;
  EXPECT_NE(t.out.find("processes "), std::string::npos) << t.out;
  const auto one = tb::testing::run_cli(
      "run fc:layers=1,nodes=16,input=32,output=4,batch=8,threads=1 --budget 0.2 --target-ci 0.05");
  EXPECT_NE(one.out.find("between processes not measured"), std::string::npos) << one.out;
  const auto bad = tb::testing::run_cli("run fc:batch=8 --repetitions 0");
  EXPECT_EQ(bad.status, 2);
  // One thread waits on no other: no round trip is taken. Two threads on two CPUs: each
  // process takes one before its timed loop.
  EXPECT_TRUE(r["metrics"]["core_round_trip_ns"].is_null()) << r["metrics"].dump();
  if (std::thread::hardware_concurrency() >= 2) {
    const auto two = tb::testing::run_cli(
        "run fc:layers=1,nodes=16,input=32,output=4,batch=8,threads=2 --budget 0.2 "
        "--target-ci 0.05 --repetitions 2 --json");
    ASSERT_EQ(two.status, 0) << two.err;
    const json r2 = json::parse(two.out)["results"][0];
    for (const auto& e : r2["repetitions"]["runs"])
      EXPECT_GT(e["core_round_trip_ns"].get<double>(), 0.0) << e.dump();
  }
}

TEST(RepetitionsCli, SweepInterleavesStoresEveryProcessAndTopsUpWhenResumed) {
  const std::string file = tmp_path("r.toml"), db = tmp_path("r.db");
  std::ofstream(file) << R"(
name = "reps"
budget = 0.2
target_ci = 0.05
[[grid]]
family = "fc"
layers = 1
nodes = [16, 32]
input = 32
output = 4
batch = 8
threads = 1
)";
  auto o = tb::testing::run_cli("sweep " + file + " --store " + db + " --repetitions 2");
  ASSERT_EQ(o.status, 0) << o.err;
  // Interleaved: both configs' first processes before either's second.
  auto line = [](int rep, const char* nodes) {
    return fmt::format("rep {}/2 {:<13} fc:layers=1,nodes={}", rep, "ok", nodes);
  };
  const auto first16 = o.err.find(line(1, "16"));
  const auto first32 = o.err.find(line(1, "32"));
  const auto second16 = o.err.find(line(2, "16"));
  ASSERT_NE(first16, std::string::npos) << o.err;
  ASSERT_NE(first32, std::string::npos) << o.err;
  ASSERT_NE(second16, std::string::npos) << o.err;
  EXPECT_LT(first32, second16);
  // Two configs of two processes: the rounds' shifts, one per round.
  EXPECT_NE(o.err.find("rounds (2 configs with 2 processes): each process's mean over its "
                       "config's median, median per round "),
            std::string::npos)
      << o.err;
  {
    auto store = tb::Store::open(db, false);
    const auto runs = store->runs();
    ASSERT_EQ(runs.size(), 2u);
    for (const auto& row : runs) {
      EXPECT_EQ(row["repetitions"], 2) << row.dump();
      EXPECT_TRUE(row["rep_max_over_min"].is_number());
      EXPECT_TRUE(row["unstable"].is_number());
    }
    tb::sql::Database d(db, SQLITE_OPEN_READONLY);
    auto st = d.prepare("SELECT result FROM run");
    while (st.step()) {
      const json result = json::parse(st.text(0));
      ASSERT_EQ(result["repetitions"]["runs"].size(), 2u);
      for (const auto& e : result["repetitions"]["runs"]) EXPECT_FALSE(e["step_times_s"].empty());
    }
  }
  // The phases' times are columns too; a store opened by a trainbench that adds such a column
  // fills it from the results it holds (a store from before the column existed).
  std::vector<double> forward;
  for (const auto& row : tb::Store::open(db, false)->runs()) {
    ASSERT_TRUE(row["phase_forward_s"].is_number()) << row.dump();
    forward.push_back(row["phase_forward_s"].get<double>());
  }
  {
    tb::sql::Database d(db, SQLITE_OPEN_READWRITE);
    d.exec("ALTER TABLE run DROP COLUMN phase_forward_s");
  }
  {
    std::vector<double> again;
    for (const auto& row : tb::Store::open(db, false)->runs())
      again.push_back(row["phase_forward_s"].get<double>());
    EXPECT_EQ(again, forward);
  }
  // Asking for more later tops every config up to 3 processes; asking for as many skips.
  o = tb::testing::run_cli("sweep " + file + " --store " + db + " --repetitions 3");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("rep 3/3 ok"), std::string::npos) << o.err;
  {
    auto store = tb::Store::open(db, false);
    for (const auto& row : store->runs()) EXPECT_EQ(row["repetitions"], 3) << row.dump();
  }
  o = tb::testing::run_cli("sweep " + file + " --store " + db + " --repetitions 3");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err.find(" ok  "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("6 already in the store"), std::string::npos) << o.err;
  // The rounds of the stored results, all three of them, though this invocation ran none.
  EXPECT_NE(o.err.find("rounds (2 configs with 3 processes)"), std::string::npos) << o.err;
  // One process asked for: no rounds to compare.
  o = tb::testing::run_cli("sweep " + file + " --store " + db + " --repetitions 1");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err.find("rounds ("), std::string::npos) << o.err;
}

TEST(RepetitionsCli, UnstableRunsAreNamedByAnalyzeAndCompare) {
  // A store with one run flagged unstable: observations and compare name it.
  const std::string file = tmp_path("u.toml"), db = tmp_path("u.db");
  std::ofstream(file) << R"(
name = "u"
budget = 0.2
target_ci = 0.05
repetitions = 2
[[grid]]
family = "fc"
layers = 1
nodes = [16, 32]
input = 32
output = 4
batch = 8
threads = 1
dtype = ["fp32", "bf16"]
)";
  ASSERT_EQ(tb::testing::run_cli("sweep " + file + " --store " + db).status, 0);
  {
    tb::sql::Database d(db, SQLITE_OPEN_READWRITE);
    // The sweep's own processes may disagree already on a shared machine: set the flags.
    d.exec("UPDATE run SET unstable = 0");
    d.exec(
        "UPDATE run SET unstable = 1, rep_max_over_min = 1.7 WHERE config LIKE '%nodes=16%' AND "
        "config LIKE '%dtype=fp32%'");
  }
  const auto obs = tb::testing::run_cli("analyze observations " + db);
  ASSERT_EQ(obs.status, 0) << obs.err;
  EXPECT_NE(obs.out.find("1 runs are UNSTABLE"), std::string::npos) << obs.out;
  EXPECT_NE(obs.out.find("were repeated in fresh processes"), std::string::npos) << obs.out;
  const auto cmp = tb::testing::run_cli("compare " + db + " --by dtype --a fp32 --b bf16");
  ASSERT_EQ(cmp.status, 0) << cmp.err;
  EXPECT_NE(cmp.out.find("UNSTABLE: 1 of the matched configs"), std::string::npos) << cmp.out;
}

}  // namespace
