// `trainbench profile` and `trainbench memory` as a user meets them: JSON, the trace file,
// the budget, one-line errors with exit status 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "store/store.h"
#include "support/cli.h"

namespace {

using Output = ::tb::testing::CliOutput;
using ::tb::testing::run;

const std::string kCliFc = "fc:layers=1,nodes=32,input=16,output=4,batch=8";

TEST(ProfileCli, JsonAndChromeTrace) {
  const std::string trace =
      ::testing::TempDir() + "/tb_cli_" + std::to_string(getpid()) + ".trace.json";
  const Output o = run("profile " + kCliFc + " --warmup 2 --steps 2 --json --trace " + trace);
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["kind"], "trainbench.profile");
  EXPECT_TRUE(j["context"].contains("libraries"));
  const auto& r = j["results"][0];
  EXPECT_EQ(r["status"], "ok");
  EXPECT_GT(r["profile"]["ops"].size(), 10u);
  EXPECT_GT(r["profile"]["flops_per_step"].get<double>(), 0);
  EXPECT_TRUE(r["profile"]["utilization"].contains("compute_utilization"));
  std::ifstream in(trace);
  const auto t = nlohmann::json::parse(in);
  EXPECT_GT(t["traceEvents"].size(), 10u);
  std::remove(trace.c_str());
}

// Two steps of a tiny model take well under the kernel's 10 ms accounting tick: the thread
// and CPU figures come from a window long enough to be counted, never a silent 0.
TEST(ProfileCli, TinyConfigsStillCountTheirThreads) {
  const Output o = run(
      "profile fc:layers=1,nodes=8,input=8,output=2,batch=2,threads=1 --warmup 2 --steps 2 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto t = nlohmann::json::parse(o.out)["results"][0]["profile"]["utilization"]["threads"];
  EXPECT_GE(t["window_s"].get<double>(), 0.25) << t.dump();
  EXPECT_GT(t["steps"].get<int64_t>(), 2) << t.dump();
  EXPECT_GE(t["threads_used"].get<int>(), 1) << t.dump();
  const Output table =
      run("profile fc:layers=1,nodes=8,input=8,output=2,batch=2,threads=1 --steps 2");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(table.out.find("threads      0 used"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" steps): computing"), std::string::npos) << table.out;
}

TEST(ProfileCli, TablesOnATerminal) {
  const Output o = run("profile " + kCliFc + " --warmup 2 --steps 2 --peak-gflops 100");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("Top 15 operators by self time"), std::string::npos);
  EXPECT_NE(o.out.find("TBD Tables V/VI"), std::string::npos);
  EXPECT_NE(o.out.find("TBD eq. 1"), std::string::npos);
  EXPECT_NE(o.out.find("aten::addmm"), std::string::npos);
}

TEST(MemoryCli, BatchesAndBudget) {
  const Output o = run("memory " + kCliFc + " --batch 8,16,32 --budget 1GiB --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["kind"], "trainbench.memory");
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][2]["memory"]["batch"], 32);
  EXPECT_EQ(j["summary"]["largest_measured_batch_within_budget"], 32);
  EXPECT_GT(j["summary"]["feature_maps_fit"]["r2"].get<double>(), 0.95);
  const Output table = run("memory " + kCliFc + " --batch 8,16 --budget 1KiB");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("largest measured batch that fits none"), std::string::npos);
  EXPECT_NE(table.out.find("|WWW"), std::string::npos);
}

TEST(ProfileCli, SweepProfilesEveryConfigIntoTheStore) {
  const std::string dir = ::testing::TempDir() + "/tb_sweep_profile_" + std::to_string(getpid());
  const std::string file = dir + ".toml", db = dir + ".db";
  std::ofstream(file)
      << "name = \"tiny\"\nbudget = 0.2\ntarget_ci = 0.1\nrepetitions = 1\n[[grid]]\n"
         "family = \"fc\"\nlayers = 1\nnodes = [16, 32]\ninput = 16\n"
         "output = 4\nbatch = 8\n";
  const Output o = run("sweep " + file + " --store " + db + " --profile");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("2 profiled"), std::string::npos) << o.out;
  auto store = tb::Store::open_read_only(db);
  const auto profiles = store->profiles();
  ASSERT_EQ(profiles.size(), 2u);
  for (const auto& p : profiles) {
    EXPECT_GT(p["ops"].size(), 10u);
    EXPECT_GT(p["flops_per_step"].get<double>(), 0);
  }
  std::remove(file.c_str());
  std::remove(db.c_str());
}

TEST(ProfileCli, RunWithMemory) {
  const Output o = run("run " + kCliFc + " --steps 5 --memory --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto m = nlohmann::json::parse(o.out)["results"][0]["memory"];
  EXPECT_EQ(m["categories"]["weights"]["peak_bytes"].get<double>(),
            m["reference"]["params_x_dtype_bytes"].get<double>());
  EXPECT_GT(m["peak_bytes"].get<double>(), 0);
}

TEST(ProfileCli, BadInputIsOneLineAndExitTwo) {
  const std::pair<std::string, const char*> cases[] = {
      {"profile fc:nodes=0", "nodes=0"},
      {"profile", "config"},
      {"profile fc: --steps 0", "steps"},
      {"profile fc: --trace /nonexistent/dir/t.json", "/nonexistent/dir/t.json"},
      {"memory fc: --batch 8,x", "'x'"},
      {"memory fc: --batch 0", "'0'"},
      {"memory fc: --batch 8,16,8", "batch size 8 is listed twice"},
      {"memory fc: --budget 8XB", "8XB"},
      {"memory fc: --budget -1GiB", "-1GiB"},
      {"memory mlp:layers=2", "unknown family 'mlp'"},
  };
  ::tb::testing::run_cli_cases(cases, [](const auto& c, const Output& o) {
    const auto& [args, needle] = c;
    EXPECT_EQ(o.status, 2) << args << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\n" << o.err;
    EXPECT_EQ(o.out, "") << args;
  });
}

}  // namespace
