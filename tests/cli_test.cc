// The trainbench program as a user meets it: exit codes, one-line errors, --help, JSON.
#include "support/cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

using Output = ::tb::testing::CliOutput;
using ::tb::testing::run;

using ::tb::testing::lines;

TEST(Cli, BadInputIsOneLineAndExitTwo) {
  const std::pair<const char*, const char*> cases[] = {
      {"run mlp:layers=4", "unknown family 'mlp'"},
      {"run fc:layer=4", "unknown parameter 'layer'"},
      {"run fc:nodes=0", "nodes=0"},
      {"run fc:nodes=-3", "nodes=-3"},
      {"run fc:batch=ten", "batch=ten"},
      {"run fc:nodes=100000000", "nodes=100000000"},
      {"run --family fc --filters 3", "unknown parameter 'filters'"},
      {"run --family nope", "unknown family 'nope'"},
      {"run --layers 4", "needs --family"},
      {"run", "give a config"},
      {"run fc: --budget -1", "budget"},
      {"frobnicate", "frobnicate"},
      {"cost cnn:image=2", "image=2"},
      {"platform --spec no-such-platform", "unknown platform 'no-such-platform'"},
      {"platform --spec /nonexistent/x.json", "cannot open"},
      {"run fc:nodes=8 --platform no-such-platform", "unknown platform"},
      {"platform --at -3", "-3"},
      // Numbers CLI11's own checks let through (NaN) or wrapped (-1 as 2^64 - 1).
      {"run fc:nodes=8 --budget nan", "'nan' is not a number in [0.01, 1e+06]"},
      {"run fc:nodes=8 --target-ci nan", "'nan' is not a number"},
      {"run fc:nodes=8 --steps abc", "'abc' is not a number"},
      {"run fc:nodes=8 --seed -1", "'-1' is not a whole number"},
      {"quantize --format e4m3 --rounding stochastic --seed 99999999999999999999 1",
       "is not a whole number"},
      {"simulate fc:nodes=8 --platform tpu-v2-board --top -1", "'-1' is not a whole number"},
      {"profile fc:nodes=8 --peak-gflops -5", "'-5' is not a positive number"},
      {"sweep demo --dry-run --budget nan", "'nan' is not a number"},
      {"emulate --lr -1", "lr -1"},
      {"emulate --lr inf", "lr inf"},
      {"emulate --lr 1e400", "lr inf"},
      {"emulate --threads -1", "threads -1"},
      {"suite --dry-run --models ''", "--models '': no model named"},
      // A directory where a file is meant, refused before any work.
      {"run fc:nodes=8 --steps 3 -o /", "--out /: is a directory"},
      {"profile fc:nodes=8 --steps 2 --trace /", "--trace /: is a directory"},
      {"run fc:nodes=8 --platform /", "/: a directory, not a platform description file"},
      {"sweep /", "sweep file '/' is a directory"},
      {"export /", "store '/' is a directory"},
      {"emulate --max-iters 1 --store /nonexistent/x.db",
       "directory '/nonexistent' does not exist"},
  };
  ::tb::testing::run_cli_cases(cases, [](const auto& c, const Output& o) {
    const auto& [args, needle] = c;
    EXPECT_EQ(o.status, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\n" << o.err;
    EXPECT_EQ(o.out, "") << args;
  });
}

// CLI11 converts integers with base 0, so 010 would be octal 8: the checked options pass
// their value on in decimal.
// Standard output that refuses the writes (a full disk): one line and exit 3, never a cut-short
// table with exit 0. An -o device is written into and left a device.
TEST(Cli, AnOutputThatRefusesWritesIsExitThree) {
  std::error_code ec;
  if (!std::filesystem::is_character_file("/dev/full", ec)) GTEST_SKIP() << "no /dev/full";
  const auto out = ::tb::testing::run_cli("formats >/dev/full");
  EXPECT_EQ(out.status, 3) << out.err;
  EXPECT_NE(out.err.find("cannot write standard output"), std::string::npos) << out.err;
  EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
  const auto file = ::tb::testing::run_cli(
      "run fc:layers=1,nodes=8,input=8,output=2,batch=4,threads=1 --budget 0.1 -o /dev/full");
  EXPECT_EQ(file.status, 3) << file.err;
  EXPECT_NE(file.err.find("'/dev/full'"), std::string::npos) << file.err;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
  EXPECT_EQ(::tb::testing::run_cli("formats >/dev/null").status, 0);
}

TEST(Cli, WholeNumbersAreDecimal) {
  const Output o = run("quantize --format e4m3 --rounding stochastic --seed 010 --json 1.3");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["seed"], 10) << o.out;
}

TEST(Cli, HelpOfEverySubcommandEndsWithExamples) {
  // Every subcommand the top-level help lists, so a new one cannot be forgotten here.
  const Output top = run("--help");
  ASSERT_EQ(top.status, 0);
  std::vector<std::string> subs = {""};
  std::istringstream lines_in(top.out.substr(top.out.find("Subcommands:")));
  std::string line;
  std::getline(lines_in, line);
  while (std::getline(lines_in, line) && line.rfind("  ", 0) == 0)
    subs.push_back(line.substr(2, line.find(' ', 2) - 2));
  EXPECT_GE(subs.size(), 16u) << top.out;
  std::vector<std::string> all;
  for (const auto& sub : subs) all.push_back(sub + " --help");
  const auto outputs = ::tb::testing::run_cli_all(all);
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string& sub = subs[i];
    const Output& o = outputs[i];
    EXPECT_EQ(o.status, 0) << sub;
    const auto at = o.out.rfind("Examples:");
    ASSERT_NE(at, std::string::npos) << sub;
    EXPECT_NE(o.out.find("trainbench " + sub, at), std::string::npos) << sub;
  }
}

TEST(Cli, JsonCarriesSchemaContextAndAReRunnableConfig) {
  const Output o = run("run fc:layers=1,nodes=16,input=16,output=4,batch=4 --budget 1 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* k : {"host", "libraries", "runtime", "trainbench"})
    EXPECT_TRUE(j["context"].contains(k)) << k;
  EXPECT_FALSE(j["context"]["libraries"]["blas"]["name"].get<std::string>().empty());
  const auto& r = j["results"][0];
  EXPECT_EQ(r["status"], "ok");
  EXPECT_GT(r["timing"]["mean_s"].get<double>(), 0);
  EXPECT_FALSE(r["step_times_s"].empty());
  // Pasting the config back gives the same canonical config.
  const Output again = run("run " + r["config"].get<std::string>() + " --budget 1 --json");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["results"][0]["config"], r["config"]);
}

TEST(Cli, EveryJsonDocumentCarriesSchemaKindAndContext) {
  const char* small = "fc:layers=1,nodes=16,input=16,output=4,batch=4";
  for (const std::string& args :
       {std::string("cost ") + small + " --json", std::string("quantize --format e4m3 3.3 --json"),
        std::string("simulate ") + small + " --platform tpu-v2-board --json",
        std::string("profile ") + small + " --steps 2 --warmup 1 --peak-gflops 100 --json",
        std::string("memory ") + small + " --json"}) {
    const Output o = run(args);
    ASSERT_EQ(o.status, 0) << args << ": " << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["schema_version"], 1) << args;
    EXPECT_EQ(j["kind"].get<std::string>().rfind("trainbench.", 0), 0u) << args;
    EXPECT_TRUE(j["context"].contains("trainbench")) << args;
  }
}

TEST(Cli, FamilyFlagsBuildTheSameConfigAsTheString) {
  const Output a = run("cost --json fc:layers=2,nodes=8,batch=4");
  const Output b = run("run --family fc --layers 2 --nodes 8 --batch 4 --budget 0.5 --json");
  ASSERT_EQ(a.status, 0);
  ASSERT_EQ(b.status, 0) << b.err;
  auto config = nlohmann::json::parse(a.out)["results"][0]["config"].get<std::string>();
  auto ran = nlohmann::json::parse(b.out)["results"][0]["config"].get<std::string>();
  EXPECT_EQ(
      ran, config.replace(
               config.find("threads=0"), 9,
               "threads=" + std::to_string(
                                nlohmann::json::parse(b.out)["results"][0]["threads"].get<int>())));
}

TEST(Cli, OomPredictedIsAStatusNotACrash) {
  const Output o = run("run fc:layers=64,nodes=65536,batch=65536 --json");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(nlohmann::json::parse(o.out)["results"][0]["status"], "oom-predicted");
}

// The reference BLAS is installed beside OpenBLAS (libblas3); pointing the loader at it
// (blas=system keeps the user's library path as it is) must be detected and warned about in
// one line.
TEST(Cli, WarnsWhenTheReferenceBlasIsActive) {
  const char* ref = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  if (!std::ifstream(ref)) GTEST_SKIP() << "reference BLAS not installed";
  const Output o = run(
      "run fc:layers=1,nodes=64,input=64,output=4,batch=8 stack:blas=system --budget 0.5 --json",
      "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto at = o.err.find("WARNING: LibTorch is using the reference BLAS");
  ASSERT_NE(at, std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("WARNING", at + 1), std::string::npos) << o.err;  // said once
  EXPECT_NE(o.err.find("apt-get install libopenblas0-openmp", at), std::string::npos) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["context"]["libraries"]["blas"]["name"], "reference");
  const Output normal =
      run("run fc:layers=1,nodes=64,input=64,output=4,batch=8 --budget 0.5 --json");
  EXPECT_EQ(normal.err.find("WARNING"), std::string::npos) << normal.err;
}

// `trainbench` is a launcher that executes trainbench-core from its own directory: without it
// there, one line naming what is missing, exit 1; through it, a run starts in the environment
// it sets (what the OpenMP runtime reads only at start), and a value of the user's is kept.
TEST(Cli, TheLauncherStartsTheProgramInItsEnvironment) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / ("tb_launcher_" + std::to_string(getpid())))
          .lexically_normal()
          .string();
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TB_BINARY, dir + "/trainbench",
                             std::filesystem::copy_options::overwrite_existing);
  FILE* p = popen((dir + "/trainbench --version 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int raw = pclose(p);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 1) << out;
  EXPECT_EQ(lines(out), 1) << out;
  EXPECT_NE(out.find("cannot run " + dir + "/trainbench-core"), std::string::npos) << out;
  const std::string config = "run fc:layers=1,nodes=8,input=8,output=2,batch=2 --steps 2 --json";
  for (const char* spin : {"", "7"}) {
    const Output o = run(config, *spin ? std::string("GOMP_SPINCOUNT=") + spin : "");
    ASSERT_EQ(o.status, 0) << o.err;
    const auto env = nlohmann::json::parse(o.out)["context"]["runtime"]["environment"];
    EXPECT_EQ(env["GOMP_SPINCOUNT"], *spin ? spin : "10000") << env.dump();
    EXPECT_EQ(env["MALLOC_MMAP_THRESHOLD_"], "33554432") << env.dump();
  }
}

TEST(Cli, PlatformFileErrorsNameTheField) {
  const std::string path = ::testing::TempDir() + "/bad-platform.json";
  std::ofstream(path) << R"({"schema_version":1,"name":"mine","kind":"accelerator","source":"me",)"
                      << R"("memory_gb":16,"memory_bandwidth_gbps":-5,"peak_tflops":{"bf16":100}})";
  const Output o = run("platform --spec " + path);
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("field 'memory_bandwidth_gbps'"), std::string::npos) << o.err;
}

TEST(PlatformCli, MeasuresCachesAndFeedsRun) {
  const std::string cache = ::testing::TempDir() + "/tb-cache-" + std::to_string(getpid());
  const std::string env = "TRAINBENCH_CACHE_DIR=" + cache;
  const Output quick = run("platform --quick --json", env);
  ASSERT_EQ(quick.status, 0) << quick.err;
  const auto p = nlohmann::json::parse(quick.out);
  EXPECT_GT(p["peak_tflops"]["fp32"].get<double>(), 0);
  EXPECT_TRUE(p["measurements"]["stream"]["validated"].get<bool>());
  // A cached all-core description answers a plain `platform`, never a --quick or --threads
  // request: a one-thread peak read from the all-core cache once let operators look slower
  // (or faster) than the machine. The quick run cached nothing; plant a description with this
  // host's fingerprint and an impossible fp32 peak.
  {
    auto planted = p;
    planted["peak_tflops"]["fp32"] = 12345.0;
    std::filesystem::create_directories(cache);
    std::ofstream(cache + "/platform-" + p["machine"]["hostname"].get<std::string>() + ".json")
        << planted.dump();
    const Output cached = run("platform --json", env);
    ASSERT_EQ(cached.status, 0) << cached.err;
    EXPECT_EQ(nlohmann::json::parse(cached.out)["peak_tflops"]["fp32"].get<double>(), 12345.0);
    const Output m = run("platform --threads 1 --quick --json", env);
    ASSERT_EQ(m.status, 0) << m.err;
    EXPECT_LT(nlohmann::json::parse(m.out)["peak_tflops"]["fp32"].get<double>(), 12345.0)
        << "a one-thread quick request answered from the cache";
    EXPECT_NE(m.err.find("the cache holds the whole host"), std::string::npos) << m.err;
  }
  // A registry platform gives the run its roofline placement.
  const Output r =
      run("run fc:layers=1,nodes=64,input=64,output=4,batch=8,dtype=bf16 --budget 0.5 --json "
          "--platform tpu-v2-board",
          env);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& res = doc["results"][0];
  EXPECT_EQ(res["roofline"]["platform"], "tpu-v2-board");
  EXPECT_EQ(res["roofline"]["bound"], "memory");
  EXPECT_DOUBLE_EQ(res["roofline"]["ridge"].get<double>(), 75.0);
  EXPECT_GT(res["metrics"]["flops_utilization"].get<double>(), 0);
}

}  // namespace
