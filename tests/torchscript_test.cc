// The `torchscript` family: a user's TorchScript module trained like any family, its FLOPs
// counted by the profiler, and every way a file or shape can be wrong reported in one line.
// The modules are made by Debian's PyTorch (/usr/bin/python3); without it the tests skip.
#include "cost/torchscript.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "base/errors.h"
#include "cost/cost.h"
#include "emulation/emulate.h"
#include "jobs/sweep_runner.h"
#include "model/activation_point.h"
#include "record/json.h"
#include "runner/memory.h"
#include "runner/profile.h"
#include "runner/runner.h"
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
# Every kind of layer operator the points take: 2-D and grouped 1-D convolutions, ReLU in and
# out of place, ReLU6, a Linear module, a product with a parameter and one of two activations.
class Layers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c1 = torch.nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.fc = torch.nn.Linear(8, 5)
        self.v = torch.nn.Parameter(torch.randn(5, 5) / 2)
        self.w = torch.nn.Parameter(torch.randn(5, 4) / 2)
    def forward(self, x):
        x = torch.nn.functional.relu6(torch.relu(self.bn(self.conv(x))))
        n, c, h, w = x.shape
        x = self.c1(x.reshape(n, c, h * w)).reshape(n, c, h, w)
        x.relu_()
        y = self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))
        z = (y.unsqueeze(2) @ y.unsqueeze(1)).mean(2)
        return (self.v @ z.unsqueeze(2)).squeeze(2) @ self.w
torch.jit.script(Layers()).save(d + "/layers.pt")
torch.jit.trace(Layers(), torch.randn(2, 3, 8, 8)).save(d + "/layers_traced.pt")
class Rnns(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = torch.nn.GRU(16, 8, batch_first=True)
        self.rnn = torch.nn.RNN(8, 8, nonlinearity="relu", bias=False)
        self.cell = torch.nn.LSTMCell(8, 8)
        self.gcell = torch.nn.GRUCell(8, 8)
        self.fc = torch.nn.Linear(8, 3)
    def forward(self, x):
        lengths = torch.tensor([3, 5, 2])
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                         enforce_sorted=False)
        out, (hn, cn) = self.lstm(packed)
        y = torch.nn.utils.rnn.pad_packed_sequence(out)[0]
        g, gh = self.gru(y.transpose(0, 1))
        y = self.rnn(g.transpose(0, 1))[0]
        h, c = self.cell(y[-1], (hn[-1], cn[-2]))
        h, c = self.cell(y[-2], (h, c))
        return self.fc(self.gcell(h, gh[0]))
torch.jit.script(Rnns()).save(d + "/rnns.pt")
class Deconv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(3, 4, 2, stride=2)
        self.w = torch.nn.Parameter(torch.randn(4, 4))
        self.b = torch.nn.Parameter(torch.randn(4))
    def forward(self, x):
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(self.up(x), 1), 1)
        return torch.addmm(self.b, y, self.w)
torch.jit.script(Deconv()).save(d + "/deconv.pt")
class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.fc = torch.nn.Linear(8, 3)
    def forward(self, x):
        return self.fc(self.enc(x).mean(1))
torch.jit.script(Encoder()).save(d + "/encoder.pt")
class Conv3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 2)
    def forward(self, x):
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool3d(self.conv(x), 1), 1))
torch.jit.trace(Conv3d(), torch.randn(2, 3, 4, 4, 4)).save(d + "/conv3d_traced.pt")
class Proj(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, proj_size=4)
        self.fc = torch.nn.Linear(4, 3)
    def forward(self, x):
        return self.fc(self.lstm(x)[0][-1])
torch.jit.script(Proj()).save(d + "/proj.pt")
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

// Layer operators that run outside the overrides of NumericsReachItsLayers.
thread_local bool t_in_override = false;
thread_local int t_escaped = 0;
std::unique_ptr<at::ObserverContext> count_escape(const at::RecordFunction& fn) {
  static const std::set<std::string> watched = {
      "aten::conv1d", "aten::conv2d",   "aten::_convolution", "aten::convolution", "aten::linear",
      "aten::addmm",  "aten::matmul",   "aten::mm",           "aten::bmm",         "aten::relu",
      "aten::relu_",  "aten::relu6",    "aten::hardtanh",     "aten::hardtanh_",   "aten::lstm",
      "aten::gru",    "aten::rnn_relu", "aten::lstm_cell",    "aten::gru_cell"};
  if (!t_in_override && watched.count(fn.name())) ++t_escaped;
  return nullptr;
}

// Emulation reaches a user's module as it reaches a family: the points see each Linear,
// Conv1d and Conv2d layer's input, named by its weight, and the overrides replace every
// convolution, linear layer, ReLU (in place, and ReLU6) and product, scripted or traced. On
// an fp32 in-order unit the loss is the plain one; coarse formats, per layer too, and other
// activations move it. A module with operators no point reaches is refused, naming them.
TEST_F(TorchScript, NumericsReachItsLayers) {
  namespace F = torch::nn::functional;
  for (const char* name : {"layers.pt", "layers_traced.pt"}) {
    SCOPED_TRACE(name);
    auto t = prepare_training(
        parse_config("torchscript:path=" + file(name) + ",input=3x8x8,batch=2,threads=1"),
        torch::kCPU, 1);
    ASSERT_TRUE(t.workload->has_activation_points()) << t.workload->activation_points_missing();
    const auto layers = t.workload->layers();
    ASSERT_EQ(layers.size(), 3u);  // conv, c1, fc
    EXPECT_EQ(layers[1][0].sizes(), (std::vector<int64_t>{8, 4, 3}));
    std::set<const void*> weights, hooked;
    for (const auto& l : layers) weights.insert(l[0].unsafeGetTensorImpl());
    int linear = 0, conv = 0, relu = 0, product = 0;
    const ActivationHook hook = [&](const torch::Tensor& x, const torch::Tensor* w) {
      if (w && weights.count(w->unsafeGetTensorImpl())) hooked.insert(w->unsafeGetTensorImpl());
      return x;
    };
    auto inside = [](auto f) {
      t_in_override = true;
      torch::Tensor y = f();
      t_in_override = false;
      return y;
    };
    Overrides o;
    o.linear = [&](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
      ++linear;
      return inside([&] { return F::linear(x, w, b); });
    };
    o.conv2d = [&](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                   const ConvOptions& g) {
      ++conv;
      return inside([&] { return torch::conv2d(x, w, b, g.stride, g.pad, g.dilation, g.groups); });
    };
    o.layer = [&](const torch::Tensor& x, torch::nn::Module& m) {
      if (!m.as<torch::nn::ReLU>()) return torch::Tensor();
      ++relu;
      return inside([&] { return torch::relu(x); });
    };
    o.product = [&](const torch::Tensor& a, const torch::Tensor& b) {
      ++product;
      return inside([&] { return torch::matmul(a, b); });
    };
    t_escaped = 0;
    const auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&count_escape).scopes({at::RecordScope::FUNCTION}));
    {
      ActivationHookScope scope(&hook, &o);
      t.workload->loss(t.batch);  // forward only: backward runs mm and convolutions of its own
    }
    at::removeCallback(handle);
    EXPECT_EQ(hooked, weights);
    EXPECT_EQ(conv, 2);
    EXPECT_EQ(linear, 3);  // fc, and the products with v and w
    EXPECT_EQ(relu, 3);    // relu, relu6, relu_
    EXPECT_EQ(product, 1);
    EXPECT_EQ(t_escaped, 0);
    // Without them, the same operators run, plainly.
    t.workload->loss(t.batch);
  }

  const std::string layers =
      "torchscript:path=" + file("layers.pt") + ",input=3x8x8,batch=2,threads=1";
  auto loss = [&](const std::string& numerics) {
    auto t = prepare_training(parse_config(layers + numerics), torch::kCPU, 3);
    return t.workload->loss(t.batch).item<double>();
  };
  const double plain = loss("");
  EXPECT_NEAR(loss(",numerics=unit:mad:mul=fp32;acc=fp32;width=1;order=sequential"), plain,
              1e-5 * std::abs(plain));
  EXPECT_EQ(loss(",numerics=act:relu"), plain);
  EXPECT_NE(loss(",numerics=act:tanh"), plain);
  EXPECT_NE(loss(",numerics=unit:mad:mul=e2m1;acc=fp32;width=1;order=sequential"), plain);
  EXPECT_NE(loss(",numerics=a.1:e2m1"), plain);  // the 1-D convolution's input
  EXPECT_EQ(loss(",numerics=a.3:e2m1"), plain);  // there is no fourth layer
  for (const char* name : {"layers.pt", "layers_traced.pt"}) {
    const RunResult r =
        run_config(parse_config("torchscript:path=" + file(name) +
                                ",input=3x8x8,batch=2,threads=1,numerics=e4m3+ls:dynamic+act:"
                                "tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=4;order=lanes"),
                   quick());
    EXPECT_EQ(r.status, Status::kOk) << name << ": " << r.error;
  }

  // A scripted nn.TransformerEncoderLayer trains through the points: its attention's
  // products and projections, addmm and baddbmm included; its fused inference path is not
  // taken in training.
  const std::string encoder =
      "torchscript:path=" + file("encoder.pt") + ",input=5x8,batch=2,threads=1";
  auto encoder_loss = [&](const std::string& numerics) {
    auto t = prepare_training(parse_config(encoder + numerics), torch::kCPU, 3);
    EXPECT_TRUE(t.workload->has_activation_points()) << t.workload->activation_points_missing();
    return t.workload->loss(t.batch).item<double>();
  };
  const double encoder_plain = encoder_loss("");
  EXPECT_NEAR(encoder_loss(",numerics=unit:mad:mul=fp32;acc=fp32;width=1;order=sequential"),
              encoder_plain, 1e-5 * std::abs(encoder_plain));
  EXPECT_NE(encoder_loss(",numerics=unit:mad:mul=e2m1;acc=fp32;width=1;order=sequential"),
            encoder_plain);
  const RunResult trained = run_config(
      parse_config(encoder + ",numerics=e4m3+act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=4;"
                             "order=lanes"),
      quick());
  EXPECT_EQ(trained.status, Status::kOk) << trained.error;

  // Refused where an operator has no route, naming it, before the run (a traced 3-D
  // convolution too) or in it (an LSTM with a projection); the step's formats still apply.
  struct Refusal {
    std::string config;
    std::vector<std::string> named;
  };
  for (const Refusal& k : {Refusal{"deconv.pt,input=3x4x4", {"aten::conv_transpose2d"}},
                           Refusal{"conv3d_traced.pt,input=3x4x4x4", {"aten::_convolution"}},
                           Refusal{"proj.pt,input=5x6", {"LSTMs with a projection"}}}) {
    const std::string c = "torchscript:path=" + file(k.config) + ",batch=2,threads=1";
    const RunResult refused = run_config(parse_config(c + ",numerics=a:bf16"), quick());
    EXPECT_EQ(refused.status, Status::kUnsupported) << k.config << ": " << refused.error;
    for (const auto& name : k.named)
      EXPECT_NE(refused.error.find(name), std::string::npos) << refused.error;
    EXPECT_EQ(std::count(refused.error.begin(), refused.error.end(), '\n'), 0) << refused.error;
    const RunResult steps = run_config(parse_config(c + ",numerics=w:bf16+g:bf16+m:bf16"), quick());
    EXPECT_EQ(steps.status, Status::kOk) << k.config << ": " << steps.error;
  }
}

// A scripted LSTM (stacked, bidirectional, on packed sequences, its final states used), GRU
// (batch-first), bias-free ReLU RNN, LSTM cell and GRU cell run on the emulated cells with the
// module's own parameters: the override sees each, none runs fused, an fp32 in-order unit keeps the
// loss and the gradients, and formats move them.
TEST_F(TorchScript, NumericsReachItsRecurrentLayers) {
  const std::string rnns = "torchscript:path=" + file("rnns.pt") + ",input=5x6,batch=3,threads=1";
  auto t = prepare_training(parse_config(rnns), torch::kCPU, 1);
  ASSERT_TRUE(t.workload->has_activation_points()) << t.workload->activation_points_missing();
  std::vector<std::string> seen;
  const emu::Policy fp32;
  Overrides o;
  o.recurrent = [&](const torch::Tensor& x, const torch::Tensor& lengths,
                    const RecurrentState& initial, torch::nn::Module& m) {
    const auto* r = dynamic_cast<RecurrentLayersImpl*>(&m);
    const std::string params = "/" + std::to_string(m.parameters().size());
    seen.push_back(!r        ? "?"
                   : r->cell ? "cell" + params
                             : std::to_string(r->options.num_layers()) +
                                   (r->options.bidirectional() ? "b" : "") +
                                   (r->options.batch_first() ? "f" : "") + params);
    t_in_override = true;
    auto y =
        emu::unit_recurrent(x, lengths, initial, m, fp32, [](const torch::Tensor& v) { return v; });
    t_in_override = false;
    return y;
  };
  t_escaped = 0;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&count_escape).scopes({at::RecordScope::FUNCTION}));
  {
    ActivationHookScope scope(nullptr, &o);
    t.workload->loss(t.batch);
  }
  at::removeCallback(handle);
  EXPECT_EQ(seen, (std::vector<std::string>{"2b/16", "1f/4", "1/2", "cell/4", "cell/4", "cell/4"}));
  EXPECT_EQ(t_escaped, 1);  // the Linear, which no override here replaces

  auto loss_and_grads = [&](const std::string& numerics) {
    auto w = prepare_training(parse_config(rnns + numerics), torch::kCPU, 3);
    auto loss = w.workload->loss(w.batch);
    loss.backward();
    std::vector<torch::Tensor> g{loss.detach()};
    for (const auto& p : w.workload->module().parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto plain = loss_and_grads("");
  const auto unit = loss_and_grads(",numerics=unit:mad:mul=fp32;acc=fp32;width=1;order=sequential");
  ASSERT_EQ(plain.size(), unit.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(torch::allclose(plain[i], unit[i], 1e-4, 1e-5)) << i;
  EXPECT_NE(loss_and_grads(",numerics=a:e2m1")[0].item<double>(), plain[0].item<double>());
  EXPECT_NE(loss_and_grads(",numerics=act:tanh-pwl")[0].item<double>(), plain[0].item<double>());
  const RunResult r = run_config(
      parse_config(rnns + ",numerics=e4m3+act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=4;"
                          "order=lanes"),
      quick());
  EXPECT_EQ(r.status, Status::kOk) << r.error;
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
  // --peak-gflops: no "no platform description" note on stderr.
  std::vector<std::string> all;
  for (const auto& k : cases) all.push_back("run " + k.args + " --steps 2 --peak-gflops 100");
  const auto outputs = testing::run_cli_all(all);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    const auto& o = outputs[i];
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
