// The adversarial (wgan_gp) and reinforcement-learning (a3c) reference models: their
// sizes against hand counts, one real training step each, the gradient penalty's second
// derivative, the game, and the units a step is worth.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "base/errors.h"
#include "cost/cost.h"
#include "model/a3c.h"
#include "model/atari_env.h"
#include "model/wgan_gp.h"
#include "model/workload.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/forward_profile.h"

namespace tb {
namespace {

int64_t count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// gan_64x64.py's residual networks, counted by hand.
int64_t generator_params(int64_t d) {
  auto up = [](int64_t in, int64_t out) {
    // BN(in), conv3x3 in->out (no bias), BN(out), conv3x3 out->out + bias, 1x1 shortcut + bias
    return 2 * in + 9 * in * out + 2 * out + (9 * out * out + out) + (in * out + out);
  };
  return (128 * 128 * d + 128 * d) + up(8 * d, 8 * d) + up(8 * d, 4 * d) + up(4 * d, 2 * d) +
         up(2 * d, d) + 2 * d + (27 * d + 3);
}
int64_t critic_params(int64_t d) {
  auto down = [](int64_t in, int64_t out) {
    // LN(in), conv3x3 in->in (no bias), LN(in), conv3x3 in->out + bias, 1x1 shortcut + bias
    return 2 * in + 9 * in * in + 2 * in + (9 * in * out + out) + (in * out + out);
  };
  return (27 * d + d) + down(d, 2 * d) + down(2 * d, 4 * d) + down(4 * d, 8 * d) +
         down(8 * d, 8 * d) + (128 * d + 1);
}

std::vector<torch::Tensor> snapshot(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}
bool changed(torch::nn::Module& m, const std::vector<torch::Tensor>& before) {
  const auto now = m.parameters();
  for (size_t i = 0; i < now.size(); ++i)
    if (!torch::equal(now[i], before[i])) return true;
  return false;
}

TEST(WganGp, ParameterCountsMatchTheHandCount) {
  for (int64_t d : {4, 8, 64}) {
    wgan::WganGp net(d, 10);
    EXPECT_EQ(count(*net.generator), generator_params(d)) << d;
    EXPECT_EQ(count(*net.critic), critic_params(d)) << d;
  }
  // The paper's size (dim 64), as python3-torch counts tests/support/wgan_gp_reference.py.
  EXPECT_EQ(generator_params(64), 8540483);
  EXPECT_EQ(critic_params(64), 7491841);
  for (const char* text : {"wgan_gp:dim=4,batch=2", "wgan_gp:dim=8,batch=3,critic_iters=2"}) {
    const Config c = parse_config(text);
    EXPECT_EQ(step_cost(c).params, count(build_workload(c)->module())) << text;
  }
}

TEST(WganGp, ParameterCountsMatchPythonTorch) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string cmd =
      "/usr/bin/python3 " TB_SOURCE_DIR "/tests/support/wgan_gp_reference.py 8 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  long long g = -1, c = -1;
  const int read = fscanf(p, "%lld %lld", &g, &c);
  if (pclose(p) != 0 || read != 2) GTEST_SKIP() << "python3-torch is not installed";
  wgan::WganGp net(8, 10);
  EXPECT_EQ(count(*net.generator), g);
  EXPECT_EQ(count(*net.critic), c);
}

TEST(WganGp, OneStepTrainsBothNetworks) {
  const Config c = parse_config("wgan_gp:dim=4,batch=2,critic_iters=2,threads=1");
  auto t = prepare_training(c, torch::kCPU, 1);
  auto& net = dynamic_cast<wgan::WganGp&>(t.workload->module());
  const auto critic0 = snapshot(*net.critic), generator0 = snapshot(*net.generator);
  train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
  double generator_loss = NAN;
  const double critic_loss = wgan::last_losses(*t.workload, &generator_loss);
  EXPECT_TRUE(std::isfinite(critic_loss));
  EXPECT_TRUE(std::isfinite(generator_loss));
  EXPECT_TRUE(changed(*net.critic, critic0));
  EXPECT_TRUE(changed(*net.generator, generator0));
  // Both Adam optimizers hold state now (first and second moments per parameter).
  ASSERT_EQ(t.workload->own_optimizers().size(), 2u);
  EXPECT_EQ(t.workload->examples_per_step(), 2 * 2);
  EXPECT_DOUBLE_EQ(t.workload->units_per_step(), 2 * 2);  // real images the critic saw
  EXPECT_EQ(find_family_schema("wgan_gp")->throughput_unit, "images");
}

// Scaling the critic's last layer by c scales its input gradient by c, so the penalty is
// P(c) = mean((c g_i - 1)^2) with g_i the per-example gradient norms, and
// dP/dc at c = 1 = mean(2 (g_i - 1) g_i) = <dP/dW, W>. Autograd gets dP/dW only by
// differentiating the input gradient again.
TEST(WganGp, GradientPenaltyIsDifferentiatedTwice) {
  torch::manual_seed(3);
  wgan::WganGp net(4, 10);
  const auto real = torch::rand({3, 3, 64, 64}) * 2 - 1;
  const auto fake = torch::rand({3, 3, 64, 64}) * 2 - 1;
  torch::manual_seed(7);
  const auto penalty = net.gradient_penalty(real, fake);
  auto& w = net.critic->output->weight;
  const auto dw = torch::autograd::grad({penalty}, {w})[0];
  ASSERT_TRUE(dw.defined());
  EXPECT_GT(dw.abs().sum().item<double>(), 0);

  torch::manual_seed(7);  // the same interpolates
  const auto eps = torch::rand({3, 1, 1, 1});
  const auto mixed = (eps * real + (1 - eps) * fake).requires_grad_(true);
  const auto g =
      torch::autograd::grad({net.critic->forward(mixed).sum()}, {mixed})[0].flatten(1).norm(2, 1);
  EXPECT_NEAR(penalty.item<double>(), (g - 1).pow(2).mean().item<double>(), 1e-5);
  const double expected = (2 * (g - 1) * g).mean().item<double>();
  const double got = (dw * w).sum().item<double>();
  ASSERT_NE(expected, 0);
  EXPECT_NEAR(got, expected, 2e-3 * std::abs(expected));
}

TEST(WganGp, PenaltyWeightChangesTheCriticUpdate) {
  auto critic_after = [](const char* text) {
    auto t = prepare_training(parse_config(text), torch::kCPU, 5);
    train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
    return snapshot(*dynamic_cast<wgan::WganGp&>(t.workload->module()).critic);
  };
  const auto a = critic_after("wgan_gp:dim=4,batch=2,critic_iters=1,lambda=0,threads=1");
  const auto b = critic_after("wgan_gp:dim=4,batch=2,critic_iters=1,lambda=10,threads=1");
  bool differ = false;
  for (size_t i = 0; i < a.size(); ++i) differ |= !torch::equal(a[i], b[i]);
  EXPECT_TRUE(differ);
}

TEST(WganGp, CostCountsEveryPass) {
  const StepCost c = step_cost(parse_config("wgan_gp:dim=4,batch=2,critic_iters=3"));
  // The critic's first convolution (3 -> 4 channels, 3x3, 64x64): 2 * 4 * 64^2 * 3 * 9 MACs
  // per image; 3 iterations of 2B = 4 images in the critic pass.
  const double per_image = 2.0 * 4 * 64 * 64 * 3 * 9;
  double critic_input = 0, penalty_input_fwd = 0, penalty_input_bwd = 0;
  for (const auto& l : c.layers) {
    if (l.name == "critic.input") critic_input = l.fwd_matmul_flops;
    if (l.name == "penalty.input") {
      penalty_input_fwd = l.fwd_matmul_flops;
      penalty_input_bwd = l.bwd_input_flops + l.bwd_weight_flops;
    }
  }
  EXPECT_DOUBLE_EQ(critic_input, 3 * 4 * per_image);
  // forward and the input gradient of B = 2 interpolates, 3 times
  EXPECT_DOUBLE_EQ(penalty_input_fwd, 3 * 2 * 2 * per_image);
  // the double backward: twice the input and weight gradients (the bias's included)
  EXPECT_DOUBLE_EQ(penalty_input_bwd, 3 * 2 * 2 * (2 * per_image + 4 * 64 * 64));
  // 3 critic updates and one generator update
  const double n = 3, pc = critic_params(4), pg = generator_params(4);
  EXPECT_NEAR(c.opt_flops, 10 * (n * pc + pg), 1e-6 * c.opt_flops);
}

TEST(GanRl, DataParallelWorkersAreRefused) {
  for (const char* text : {"wgan_gp:workers=2", "a3c:workers=2"})
    EXPECT_THROW(parse_config(text), UsageError) << text;
  const auto o = testing::run_cli("run a3c:batch=5 --workers 2");
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("workers=2"), std::string::npos) << o.err;
}

TEST(Pong, RendersFramesThatFollowTheActions) {
  PongEnv up(11), down(11);
  ASSERT_EQ(up.screen().size(), size_t(210 * 160 * 3));
  ASSERT_EQ(up.observation().size(), size_t(4 * 84 * 84));
  EXPECT_EQ(up.observation(), down.observation());  // same seed, same first frame
  for (int i = 0; i < 5; ++i) {
    up.step(1);
    down.step(2);
  }
  EXPECT_NE(up.screen(), down.screen());
  EXPECT_NE(up.observation(), down.observation());
  EXPECT_EQ(up.frames(), 5 * PongEnv::kFrameSkip);
  // The stack holds the last four observations: the ball and the paddle moved between them.
  const auto& o = up.observation();
  const size_t plane = 84 * 84;
  EXPECT_FALSE(std::equal(o.begin(), o.begin() + plane, o.begin() + 3 * plane));
  for (float v : o) ASSERT_TRUE(v >= 0 && v <= 1);
  // The agent's paddle is drawn in its colour somewhere in column 141.
  bool paddle = false;
  for (int y = 0; y < 210; ++y) {
    const uint8_t* p = &up.screen()[(size_t(y) * 160 + 141) * 3];
    paddle |= p[0] == 92 && p[1] == 186 && p[2] == 92;
  }
  EXPECT_TRUE(paddle);
}

TEST(Pong, IsDeterministicAndEndsAtTwentyOnePoints) {
  PongEnv a(5), b(5), c(6);
  float total = 0;
  int steps = 0;
  bool done = false;
  bool differ = false;
  while (!done && steps < 20000) {
    const int action = (steps / 7) % 3;
    const auto ra = a.step(action), rb = b.step(action);
    c.step(action);
    ASSERT_EQ(ra.reward, rb.reward);
    ASSERT_EQ(a.observation(), b.observation());
    differ |= a.observation() != c.observation();
    total += ra.reward, done = ra.done, ++steps;
  }
  ASSERT_TRUE(done);
  EXPECT_TRUE(differ);  // another seed serves differently
  EXPECT_TRUE(a.agent_score() == 21 || a.opponent_score() == 21);
  EXPECT_EQ(total, a.agent_score() - a.opponent_score());
}

TEST(A3c, ParameterCountsMatchTheHandCount) {
  // conv 4->16 8x8 + bias, conv 16->32 4x4 + bias, fc 32*9*9 -> 256, policy 256 -> 3, value
  constexpr int64_t expected =
      (16 * 4 * 64 + 16) + (32 * 16 * 16 + 32) + (2592 * 256 + 256) + (256 * 3 + 3) + (256 + 1);
  static_assert(expected == 677172, "the count docs/models/gan-rl.md quotes");
  for (const char* text : {"a3c", "a3c:actors=3,batch=20"}) {
    const Config c = parse_config(text);
    EXPECT_EQ(count(build_workload(c)->module()), expected) << text;
    EXPECT_EQ(step_cost(c).params, expected) << text;
  }
}

TEST(A3c, OneStepOfTwoActorsUpdatesTheSharedWeights) {
  const Config c = parse_config("a3c:actors=2,batch=5,threads=2");
  auto t = prepare_training(c, torch::kCPU, 1);
  const auto before = snapshot(t.workload->module());
  train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
  const auto losses = a3c::last_losses(*t.workload);
  ASSERT_EQ(losses.size(), 2u);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NE(losses[0], losses[1]);  // each actor plays its own game
  EXPECT_TRUE(changed(t.workload->module(), before));
  EXPECT_EQ(t.workload->examples_per_step(), 2 * 5);                            // agent steps
  EXPECT_DOUBLE_EQ(t.workload->units_per_step(), 2 * 5 * PongEnv::kFrameSkip);  // frames
  EXPECT_EQ(find_family_schema("a3c")->throughput_unit, "frames");
  // Deterministic: the same seed gives the same update.
  auto u = prepare_training(c, torch::kCPU, 1);
  train_step(*u.workload, *u.optimizer, u.batch, torch::kCPU);
  EXPECT_EQ(a3c::last_losses(*u.workload), losses);
}

// The training forward of loss() against the cost model's, as cost_test does for the
// generated families (LibTorch's profiler counts conv2d and addmm FLOPs).
TEST(A3c, TrainingForwardFlopsMatchTheProfiler) {
  const Config c = parse_config("a3c:actors=1,batch=6");
  const double profiled = testing::profile_forward(c).matmul;
  double modeled = 0;
  for (const auto& l : step_cost(c).layers)
    if (l.name.rfind("train.", 0) == 0) modeled += l.fwd_matmul_flops;
  const double T = 6;
  EXPECT_DOUBLE_EQ(
      modeled, 2 * T * (16 * 20 * 20 * 4 * 64 + 32 * 9 * 9 * 16 * 16 + 2592 * 256 + 256 * 3 + 256));
  EXPECT_NEAR(modeled / profiled, 1.0, 0.01) << profiled;
}

}  // namespace
}  // namespace tb
