// The `torchscript` family: a user's TorchScript module trained like any family, its FLOPs
// counted by the profiler, and every way a file or shape can be wrong reported in one line.
// The modules are made by Debian's PyTorch (/usr/bin/python3); without it the tests skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "cost/cost.h"
#include "model/torchscript_family.h"
#include "record/json.h"
#include "runner/memory.h"
#include "runner/profile.h"
#include "runner/runner.h"
#include "runner/sweep_runner.h"
#include "spec/errors.h"
#include "store/store.h"
#include "support/cli.h"

namespace tb {
namespace {

const char* kMakeModules = R"py(
import sys, torch
d = sys.argv[1]
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                          torch.nn.ReLU(), torch.nn.Linear(256, 10))
torch.jit.script(mlp).save(d + "/mlp.pt")
class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)
    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))
torch.jit.script(Cnn()).save(d + "/cnn.pt")
class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(6, 3)
    def forward(self, x, y):
        return self.a(x) + self.b(y)
torch.jit.trace(Two(), (torch.randn(2, 4), torch.randn(2, 6))).save(d + "/two.pt")
torch.jit.script(torch.nn.ReLU()).save(d + "/noparams.pt")
open(d + "/garbage.pt", "w").write("not a zip archive\n")
)py";

class TorchScript : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "/tb-torchscript-" + std::to_string(getpid());
    if (access("/usr/bin/python3", X_OK) != 0) return;
    // From a file: torch.jit.script reads the classes' source with inspect, which fails on stdin.
    if (std::system(("mkdir -p " + dir_).c_str()) != 0) return;
    std::ofstream(dir_ + "/make.py") << kMakeModules;
    const std::string cmd =
        "/usr/bin/python3 " + dir_ + "/make.py " + dir_ + " > " + dir_ + ".log 2>&1";
    ready_ = std::system(cmd.c_str()) == 0 && access((dir_ + "/garbage.pt").c_str(), R_OK) == 0;
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + dir_ + " " + dir_ + ".log").c_str()); }
  void SetUp() override {
    if (!ready_) GTEST_SKIP() << "no /usr/bin/python3 with torch to make TorchScript modules";
  }
  static std::string file(const std::string& name) { return dir_ + "/" + name; }
  static RunOptions quick() {
    RunOptions o;
    o.timing.fixed_steps = 6;
    o.memory_limit = 8.0 * (1LL << 30);
    return o;
  }
  static std::string dir_;
  static bool ready_;
};
std::string TorchScript::dir_;
bool TorchScript::ready_ = false;

// The same MLP as mlp.pt, as the fc family describes it analytically.
const char* kSameMlp = "fc:layers=2,nodes=256,input=32,output=10,batch=16,optimizer=sgd";

TEST_F(TorchScript, MlpTrainsWithFlopsFromTheProfiler) {
  const Config c = parse_config("torchscript:path=" + file("mlp.pt") +
                                ",input=32,target=classes,batch=16,optimizer=sgd,threads=1");
  EXPECT_EQ(parse_config(c.str()), c);
  const RunResult r = run_config(c, quick());
  ASSERT_EQ(r.status, Status::kOk) << r.error;
  EXPECT_EQ(r.steps.steps, 6);
  EXPECT_EQ(r.step_times.size(), 6u);
  EXPECT_GT(r.steps.mean, 0);
  EXPECT_EQ(r.cost.source, "profiler");
  const StepCost analytic = step_cost(parse_config(kSameMlp));
  EXPECT_EQ(r.cost.params, analytic.params);
  EXPECT_NEAR(r.cost.flops() / analytic.flops(), 1.0, 0.03)
      << "profiler " << r.cost.flops() << " analytic " << analytic.flops();
  EXPECT_NEAR(r.cost.fwd_flops / analytic.fwd_flops, 1.0, 0.03);
  EXPECT_NEAR(r.cost.bwd_flops / analytic.bwd_flops, 1.0, 0.03);
  EXPECT_GT(r.achieved_flops, 0);
  EXPECT_DOUBLE_EQ(r.cost.memory.weights, 4.0 * double(analytic.params));
  // The JSON (and so the store) says where the FLOPs came from.
  EXPECT_EQ(to_json(r, false)["cost"]["source"], "profiler");
  EXPECT_EQ(to_json(run_config(parse_config(kSameMlp + std::string(",threads=1")),
                               [] {
                                 RunOptions o = quick();
                                 o.timing.fixed_steps = 2;
                                 return o;
                               }()),
                    false)["cost"]["source"],
            "analytic");
}

TEST_F(TorchScript, CnnRegressionAndTwoInputs) {
  const RunResult cnn =
      run_config(parse_config("torchscript:path=" + file("cnn.pt") +
                              ",input=3x16x16,target=regression,batch=4,optimizer=adam,threads=1"),
                 quick());
  ASSERT_EQ(cnn.status, Status::kOk) << cnn.error;
  EXPECT_EQ(cnn.cost.params, 3 * 8 * 9 + 8 + 2 * 8 + 8 * 5 + 5);
  EXPECT_GT(cnn.cost.fwd_matmul_flops, 2.0 * 4 * 16 * 16 * 8 * 27 * 0.99);  // the convolution
  const RunResult two = run_config(
      parse_config("torchscript:path=" + file("two.pt") + ",input=4+6,batch=8,threads=1"), quick());
  ASSERT_EQ(two.status, Status::kOk) << two.error;
  EXPECT_EQ(two.cost.params, 4 * 3 + 3 + 6 * 3 + 3);
}

TEST_F(TorchScript, ProfileAndMemoryWorkOnIt) {
  const Config c = parse_config("torchscript:path=" + file("mlp.pt") +
                                ",input=32,batch=16,optimizer=momentum,threads=1");
  ProfileOptions po;
  po.warmup_steps = 2;
  po.steps = 2;
  const ProfileRun p = profile_config(c, po);
  ASSERT_EQ(p.status, Status::kOk) << p.error;
  EXPECT_GT(p.profile.flops, 0);
  const StepCost same = step_cost(
      parse_config("fc:layers=2,nodes=256,input=32,output=10,batch=16,optimizer=momentum"));
  EXPECT_NEAR(p.profile.flops / same.flops(), 1.0, 0.05);
  EXPECT_DOUBLE_EQ(p.profile.model_flops, p.profile.flops);  // no cost description: profiled
  const MemoryRun m = measure_memory(c, MemoryOptions{});
  ASSERT_EQ(m.status, Status::kOk) << m.error;
  const double params = double(step_cost(parse_config(kSameMlp)).params);
  EXPECT_DOUBLE_EQ(m.breakdown.peak[kWeights], 4 * params);
  EXPECT_DOUBLE_EQ(m.breakdown.peak[kOptimizerState], 4 * params);  // one momentum buffer
}

TEST(TorchScriptShapes, ParseAndRejectBadText) {
  EXPECT_EQ(parse_shapes("3x224x224"), (std::vector<std::vector<int64_t>>{{3, 224, 224}}));
  EXPECT_EQ(parse_shapes("16+3x8x8"), (std::vector<std::vector<int64_t>>{{16}, {3, 8, 8}}));
  EXPECT_EQ(shapes_text(parse_shapes("016+3x8")), "16+3x8");
  for (const char* bad : {"", "3x", "x3", "3xfoo", "3x0", "-3", "3++4", "3 x 4", "3.5"})
    EXPECT_THROW(parse_shapes(bad), UsageError) << bad;
  try {
    parse_config("torchscript:path=m.pt,input=3xfoo");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("input=3xfoo"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_config("torchscript:path=m.pt,input=03x4").get("input"), "3x4");
}

// Each error: one line naming the bad value, exit status 2.
TEST_F(TorchScript, ErrorsAreOneLineWithStatus2) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--torchscript " + file("missing.pt") + " --input 32", "no such file"},
      {"--torchscript " + file("garbage.pt") + " --input 32", "not a TorchScript archive"},
      {"--torchscript " + file("noparams.pt") + " --input 32", "no trainable parameters"},
      {"--torchscript " + file("mlp.pt") + " --input 33", "rejects input=33"},
      {"--torchscript " + file("mlp.pt") + " --input 3xfoo", "input=3xfoo"},
      {"--torchscript " + file("mlp.pt"), "--input"},
      {"torchscript:path=" + file("mlp.pt") + ",input=32,target=pixels", "target=pixels"},
  };
  for (const auto& k : cases) {
    // --peak-gflops: no "no platform description" note on stderr.
    const auto o = testing::run_cli("run " + k.args + " --steps 2 --peak-gflops 100");
    EXPECT_EQ(o.status, 2) << k.args << "\n" << o.err;
    EXPECT_NE(o.err.find(k.expect), std::string::npos) << k.args << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << k.args << "\n" << o.err;
  }
  // The module's own complaint is in the line, not the interpreter's preamble.
  const auto shape = testing::run_cli("run --torchscript " + file("mlp.pt") +
                                      " --input 33 --steps 2 --peak-gflops 100");
  EXPECT_NE(shape.err.find("mat1 and mat2"), std::string::npos) << shape.err;
}

TEST_F(TorchScript, CliSugarRoundTripsAndSweepRecordsInvalid) {
  const auto o = testing::run_cli("run --torchscript " + file("two.pt") +
                                  " --input 4,6 --target regression --batch 8 --steps 3 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out);
  const std::string config = doc["results"][0]["config"];
  EXPECT_EQ(config.rfind("torchscript:path=/", 0), 0u) << config;  // made absolute
  EXPECT_NE(config.find("input=4+6,target=regression,batch=8"), std::string::npos) << config;
  EXPECT_EQ(doc["results"][0]["cost"]["source"], "profiler");
  // profile and memory take the same sugar, and refuse a broken file the same way.
  const auto prof = testing::run_cli("profile --torchscript " + file("mlp.pt") +
                                     " --input 32 --warmup 1 --steps 1 --json");
  ASSERT_EQ(prof.status, 0) << prof.err;
  EXPECT_GT(
      nlohmann::json::parse(prof.out)["results"][0]["profile"]["flops_per_step"].get<double>(), 0)
      << prof.out.substr(0, 2000);
  const auto mem = testing::run_cli("memory --torchscript " + file("garbage.pt") + " --input 32");
  EXPECT_EQ(mem.status, 2) << mem.err;
  EXPECT_NE(mem.err.find("not a TorchScript archive"), std::string::npos) << mem.err;
  // A sweep records a broken file as invalid and goes on with the next config.
  const std::string db = dir_ + "/sweep.db";
  auto store = Store::open(db);
  SweepOptions so;
  so.binary = TB_BINARY;
  so.budget_s = 0.2;
  so.timeout_s = 300;
  const std::vector<Config> configs = {
      parse_config("torchscript:path=" + file("garbage.pt") + ",input=32,threads=1"),
      parse_config(config)};
  const SweepSummary sum = run_sweep(configs, *store, so, [](const SweepEvent&) {});
  EXPECT_TRUE(sum.harness_error.empty()) << sum.harness_error;
  EXPECT_EQ(sum.ran, 2u);
  EXPECT_EQ(sum.ok, 1u);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["status"], "invalid");
  EXPECT_NE(runs[0]["error"].get<std::string>().find("not a TorchScript archive"),
            std::string::npos);
  EXPECT_EQ(runs[1]["status"], "ok");
  EXPECT_EQ(runs[1]["cost_source"], "profiler");
}

}  // namespace
}  // namespace tb
