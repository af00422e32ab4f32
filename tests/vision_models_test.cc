// The image-classification reference models against torchvision 0.14's definitions:
// parameter counts (hard-coded, and name by name when Debian's python3-torchvision is
// installed), the cost description against the module and LibTorch's profiler, and one
// training step each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cost/cost.h"
#include "model/workload.h"
#include "runner/profile.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/forward_profile.h"

namespace tb {
namespace {

struct Reference {
  const char* family;
  const char* torchvision;  // constructor call in torchvision.models
  int64_t params;           // sum of numel over torchvision's parameters()
  const char* small;        // without batch: a size that builds and trains in about a second
};

// torchvision 0.14: sum(p.numel() for p in torchvision.models.X(weights=None).parameters()).
const Reference kModels[] = {
    {"resnet50", "resnet50(weights=None)", 25557032, "resnet50:image=64"},
    {"inception3",
     "inception_v3(weights=None, aux_logits=True, init_weights=True, transform_input=False)",
     27161264, "inception3:image=299"},
    {"densenet121", "densenet121(weights=None)", 7978856, "densenet121:image=64"},
    {"mobilenet_v2", "mobilenet_v2(weights=None)", 3504872, "mobilenet_v2:image=64"},
    {"squeezenet1_1", "squeezenet1_1(weights=None)", 1235496, "squeezenet1_1:image=64"},
};

using Shapes = std::map<std::string, std::vector<int64_t>>;

// Parameters and buffers (BN statistics) of the built module, by name.
std::pair<Shapes, Shapes> named_shapes(torch::nn::Module& m) {
  std::pair<Shapes, Shapes> out;
  for (const auto& p : m.named_parameters()) out.first[p.key()] = p.value().sizes().vec();
  for (const auto& b : m.named_buffers()) out.second[b.key()] = b.value().sizes().vec();
  return out;
}

int64_t total(const Shapes& s) {
  int64_t n = 0;
  for (const auto& [name, dims] : s) {
    int64_t e = 1;
    for (auto d : dims) e *= d;
    n += e;
  }
  return n;
}

TEST(VisionModels, ParameterCountsMatchTorchvisionAndTheCostModel) {
  for (const auto& r : kModels) {
    const Config c = parse_config(std::string(r.small) + ",batch=2");
    auto w = build_workload(c);
    const int64_t built = total(named_shapes(w->module()).first);
    EXPECT_EQ(built, r.params) << r.family;
    EXPECT_EQ(step_cost(c).params, built) << r.family;
    // The image size changes no parameter; the class count changes only the classifiers.
    EXPECT_EQ(step_cost(parse_config(std::string(r.family) + ":classes=10,batch=2")).params,
              total(named_shapes(
                        build_workload(parse_config(std::string(r.family) + ":classes=10,batch=2"))
                            ->module())
                        .first))
        << r.family;
  }
}

// Every parameter and buffer name and shape, as torchvision defines them.
TEST(VisionModels, NamesAndShapesMatchTorchvision) {
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0) GTEST_SKIP() << python << " is not installed";
  std::string script =
      "import warnings; warnings.simplefilter('ignore')\n"
      "import torchvision.models as m\n";
  for (const auto& r : kModels)
    script += std::string("net = m.") + r.torchvision + "\nprint('model " + r.family +
              "')\n"
              "for k, t in net.named_parameters(): print('p', k, *t.shape)\n"
              "for k, t in net.named_buffers(): print('b', k, *t.shape)\n";
  const std::string file = ::testing::TempDir() + "/tb_vision_" + std::to_string(getpid()) + ".py";
  { std::ofstream(file) << script; }
  FILE* p = popen((std::string(python) + " " + file + " 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  if (pclose(p) != 0 || text.find("model ") == std::string::npos)
    GTEST_SKIP() << "torchvision is not importable by " << python;
  std::map<std::string, std::pair<Shapes, Shapes>> reference;
  std::istringstream lines(text);
  std::string line, model;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string kind, name;
    f >> kind >> name;
    if (kind == "model") {
      model = name;
      continue;
    }
    std::vector<int64_t> dims;
    for (int64_t d; f >> d;) dims.push_back(d);
    (kind == "p" ? reference[model].first : reference[model].second)[name] = dims;
  }
  for (const auto& r : kModels) {
    auto w = build_workload(parse_config(std::string(r.small) + ",batch=2"));
    const auto built = named_shapes(w->module());
    ASSERT_TRUE(reference.count(r.family)) << r.family;
    EXPECT_EQ(total(reference[r.family].first), r.params) << r.family;
    EXPECT_EQ(built.first, reference[r.family].first) << r.family << " parameters";
    EXPECT_EQ(built.second, reference[r.family].second) << r.family << " buffers";
  }
}

// LibTorch's profiler counts the FLOPs of aten::conv2d (grouped ones included) and
// aten::addmm; the cost model's forward convolution/GEMM FLOPs must agree within 1%.
TEST(VisionModels, ForwardConvolutionFlopsMatchTheProfiler) {
  for (const auto& r : kModels) {
    // Two images: Inception's auxiliary head ends in a 1x1 feature map, which batch norm
    // cannot normalise in training mode with a single image.
    const Config c = parse_config(std::string(r.small) + ",batch=2");
    const double profiled = testing::profile_forward(c).matmul;
    const double modeled = step_cost(c).fwd_matmul_flops;
    ASSERT_GT(profiled, 0) << r.family;
    EXPECT_NEAR(modeled / profiled, 1.0, 0.01)
        << r.family << " model " << modeled << " profiler " << profiled;
  }
}

TEST(VisionModels, FullSizeForwardFlopsAreTheKnownOnes) {
  // Forward multiply-accumulates per 224x224 image (299 for Inception-v3, without its
  // auxiliary head), as LibTorch's profiler counts them for torchvision's own models in
  // eval mode (conv2d + addmm), measured with /usr/bin/python3 and torchvision 0.14.
  const std::pair<const char*, double> macs[] = {{"resnet50:batch=2", 4.089184256e9},
                                                 {"densenet121:batch=2", 2.834161664e9},
                                                 {"mobilenet_v2:batch=2", 0.300774272e9},
                                                 {"squeezenet1_1:batch=2", 0.349151936e9},
                                                 {"inception3:batch=2", 5.713216096e9}};
  for (const auto& [text, expected] : macs) {
    const StepCost c = step_cost(parse_config(text));
    double fwd = c.fwd_matmul_flops;
    if (std::string(text).rfind("inception3", 0) == 0)
      for (const auto& l : c.layers)
        if (l.name.rfind("AuxLogits.", 0) == 0) fwd -= l.fwd_matmul_flops;
    EXPECT_NEAR(fwd / 2 / 2 / expected, 1.0, 1e-6) << text << " GMACs per image " << fwd / 4e9;
  }
}

// The operators these models emit (grouped convolutions, ReLU6 as hardtanh, cat, dropout,
// average pooling) are in the profile's cost table, so a profile's FLOPs add up to the cost
// model's. Backward differs by what the operators cannot show: the first convolution's
// unneeded input gradient, bias gradients, pooling kernel sizes.
TEST(VisionModels, ProfiledOperatorFlopsAddUpToTheCostModel) {
  for (const char* text :
       {"mobilenet_v2:image=32,batch=2,threads=1", "squeezenet1_1:image=32,batch=2,threads=1"}) {
    ProfileOptions o;
    o.warmup_steps = 1;
    o.steps = 1;
    o.peak_flops = 1e11;
    const ProfileRun run = profile_config(parse_config(text), o);
    ASSERT_EQ(run.status, Status::kOk) << run.error;
    const StepCost c = step_cost(parse_config(text));
    const auto phase = run.profile.phase_flops();
    EXPECT_NEAR(phase.at("forward") / c.fwd_flops, 1.0, 0.03) << text;
    EXPECT_NEAR(phase.at("backward") / c.bwd_flops, 1.0, 0.06) << text;
    std::set<std::string> ops;
    for (const auto& op : run.profile.ops) ops.insert(op.name);
    if (std::string(text).rfind("mobilenet", 0) == 0) {
      EXPECT_TRUE(ops.count("aten::hardtanh_") || ops.count("aten::hardtanh")) << text;
      EXPECT_TRUE(ops.count("aten::hardtanh_backward")) << text;
    } else {
      EXPECT_TRUE(ops.count("aten::cat")) << text;
    }
  }
}

bool finite_nonzero_grad(const torch::Tensor& p) {
  return p.grad().defined() && torch::isfinite(p.grad()).all().item<bool>() &&
         p.grad().abs().sum().item<double>() > 0;
}

TEST(VisionModels, OneTrainingStepEach) {
  for (const auto& r : kModels) {
    const Config c = parse_config(std::string(r.small) + ",batch=2");
    auto t = prepare_training(c, torch::kCPU, 1);
    auto before = t.workload->module().parameters()[0].clone();
    const torch::Tensor loss = t.workload->loss(t.batch);
    // Untrained logits give a cross-entropy of the order of ln(1000) = 6.9 (Inception adds
    // 0.4 x its auxiliary head's); an exploding initialisation would give far more.
    const double chance = std::log(1000.0);
    EXPECT_TRUE(std::isfinite(loss.item<double>())) << r.family;
    EXPECT_GT(loss.item<double>(), 0.5 * chance) << r.family;
    EXPECT_LT(loss.item<double>(), 5 * chance) << r.family;
    train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
    for (const auto& p : t.workload->module().named_parameters())
      EXPECT_TRUE(finite_nonzero_grad(p.value())) << r.family << " " << p.key();
    EXPECT_FALSE(torch::equal(before, t.workload->module().parameters()[0])) << r.family;
  }
}

TEST(VisionModels, InceptionAuxiliaryLossOnlyInTraining) {
  auto w = build_workload(parse_config("inception3:image=299,batch=2,classes=10"));
  const Batch b = w->make_batch(torch::kCPU, torch::kFloat32, 3);
  auto& m = w->module();
  auto aux_weight = [&] { return m.named_parameters()["AuxLogits.fc.weight"]; };
  m.eval();
  w->loss(b).backward();
  EXPECT_FALSE(aux_weight().grad().defined()) << "the auxiliary head ran in eval mode";
  EXPECT_TRUE(finite_nonzero_grad(m.named_parameters()["fc.weight"]));
  m.train();
  w->loss(b).backward();
  EXPECT_TRUE(finite_nonzero_grad(aux_weight())) << "the auxiliary loss is not in the loss";
}

TEST(VisionModels, SchemasDescribeReferenceModels) {
  for (const auto& r : kModels) {
    const FamilySchema* s = find_family_schema(r.family);
    ASSERT_NE(s, nullptr) << r.family;
    EXPECT_EQ(s->task, "image classification");
    EXPECT_EQ(s->throughput_unit, "images");
    EXPECT_FALSE(s->batch_sweep.empty());
    EXPECT_EQ(parse_config(s->example).family(), r.family);
  }
  EXPECT_EQ(parse_config("resnet50").get("optimizer"), "momentum");
  EXPECT_EQ(parse_config("inception3").get("optimizer"), "rmsprop");
  EXPECT_EQ(parse_config("inception3").get("image"), "299");
  EXPECT_EQ(parse_config("densenet121").get("image"), "224");
}

TEST(VisionModels, CliRunsAStepAndRejectsTooSmallInception) {
  auto ok = testing::run_cli("run squeezenet1_1:image=64,batch=2,threads=1 --steps 2 --json");
  ASSERT_EQ(ok.status, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out);
  const auto& r = j["results"][0];
  EXPECT_EQ(r["status"], "ok");
  EXPECT_EQ(r["metrics"]["unit"], "images");
  EXPECT_GT(r["metrics"]["units_per_s"].get<double>(), 0);

  auto bad = testing::run_cli("run inception3:image=224,batch=2");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("224"), std::string::npos) << bad.err;
  bad = testing::run_cli("run inception3:batch=1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("batch=1"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tb
