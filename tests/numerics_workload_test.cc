// Emulated number formats in a generated family's training step (emulation/numerics_workload.h):
// each point rounds what it names, checked against a hand-written reference step.
#include "emulation/numerics_workload.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>

#include "base/errors.h"
#include "emulation/fused_update.h"
#include "model/activation_point.h"
#include "runner/profile.h"
#include "runner/runner.h"
#include "spec/stack.h"
#include "support/coverage.h"

namespace {

using namespace tb;
using tb::testing::Coverage;
using tb::testing::forward_coverage;

const char* kTinyFc = "fc:layers=1,nodes=6,input=5,output=3,batch=7,threads=1,optimizer=";

torch::Tensor q(const torch::Tensor& x, const std::string& format) {
  return emu::QuantPoint::parse(format).apply(x);
}

struct Stepped {
  TrainingSetup t;
  std::vector<torch::Tensor> before;  // parameter values before the step
};

Stepped one_step(const std::string& optimizer, const std::string& numerics) {
  Stepped s;
  s.t = prepare_training(parse_config(std::string(kTinyFc) + optimizer + ",numerics=" + numerics),
                         torch::kCPU, 3);
  for (const auto& p : s.t.workload->module().parameters()) s.before.push_back(p.detach().clone());
  train_step(*s.t.workload, *s.t.optimizer, s.t.batch, torch::kCPU);
  return s;
}

// fc with one hidden layer: the gradients of the step, computed by hand from parameter values
// `w` (already rounded as the policy would) with activations rounded to `act` ("off": none).
std::vector<torch::Tensor> reference_grads(std::vector<torch::Tensor> w, const Batch& b,
                                           const std::string& act) {
  for (auto& t : w) t = t.detach().clone().requires_grad_(true);
  auto a = [&](const torch::Tensor& x) { return act == "off" ? x : q(x, act); };
  // Straight-through: the rounding is an identity for the gradient.
  auto ste = [&](const torch::Tensor& x) { return x + (a(x.detach()) - x.detach()); };
  auto h = torch::relu(torch::nn::functional::linear(ste(b.inputs[0]), w[0], w[1]));
  auto logits = ste(torch::nn::functional::linear(ste(h), w[2], w[3]));
  torch::nn::functional::cross_entropy(logits, b.target).backward();
  std::vector<torch::Tensor> g;
  for (auto& t : w) g.push_back(t.grad());
  return g;
}

TEST(NumericsWorkload, Fp32IsThePlainWorkload) {
  auto inner = build_workload(parse_config("fc:layers=1,nodes=4"));
  Workload* raw = inner.get();
  EXPECT_EQ(emu::with_numerics(std::move(inner), num::parse_numerics("fp32"), 1).get(), raw);
}

TEST(NumericsWorkload, WeightsAreRoundedForTheStepAndMastersKept) {
  const Stepped s = one_step("sgd", "w:e4m3");
  std::vector<torch::Tensor> rounded;
  bool changed = false;
  for (const auto& w : s.before) {
    rounded.push_back(q(w, "e4m3"));
    changed = changed || !torch::equal(rounded.back(), w);
  }
  ASSERT_TRUE(changed) << "e4m3 left every weight as it was: the test shows nothing";
  const auto ref = reference_grads(rounded, s.t.batch, "off");
  const auto params = s.t.workload->module().parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref[i], 1e-5, 1e-6)) << i;
    // SGD (lr 1e-3) updated the float32 master, not the rounded copy.
    EXPECT_TRUE(torch::allclose(params[i].detach(), s.before[i] - 1e-3 * ref[i], 1e-6, 1e-7)) << i;
  }
}

TEST(NumericsWorkload, PerLayerPointsApplyToTheirLayerOnly) {
  // Layer 0 (the hidden Linear) keeps float32 weights; layer 1 (the output Linear) takes e4m3.
  const Stepped s = one_step("momentum", "w:e4m3+w.0:off+o.1:e5m2");
  const std::vector<torch::Tensor> rounded = {s.before[0], s.before[1], q(s.before[2], "e4m3"),
                                              q(s.before[3], "e4m3")};
  ASSERT_FALSE(torch::equal(rounded[2], s.before[2]));
  const auto ref = reference_grads(rounded, s.t.batch, "off");
  const auto params = s.t.workload->module().parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref[i], 1e-5, 1e-6)) << i;
  // Momentum buffers: rounded to e5m2 in layer 1 only.
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& st =
        *s.t.optimizer->state().at(c10::guts::to_string(params[i].unsafeGetTensorImpl()));
    const auto& m = dynamic_cast<const torch::optim::SGDParamState&>(st).momentum_buffer();
    EXPECT_EQ(torch::equal(m, q(m, "e5m2")), i >= 2) << i;
  }
}

TEST(NumericsWorkload, ActivationsAreRoundedAtTheFamilysPoints) {
  const Stepped s = one_step("sgd", "a:e4m3");
  const auto ref = reference_grads(s.before, s.t.batch, "e4m3");
  const auto plain = reference_grads(s.before, s.t.batch, "off");
  const auto params = s.t.workload->module().parameters();
  bool differs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref[i], 1e-5, 1e-6)) << i;
    differs = differs || !torch::allclose(ref[i], plain[i], 1e-5, 1e-6);
  }
  EXPECT_TRUE(differs) << "rounding the activations changed no gradient: the test shows nothing";
}

TEST(NumericsWorkload, OptimizerStateAndMastersEndInTheirFormats) {
  const Stepped s = one_step("momentum", "o:e5m2+m:bf16");
  const auto params = s.t.workload->module().parameters();
  for (const auto& p : params) EXPECT_TRUE(torch::equal(p.detach(), q(p.detach(), "bf16")));
  int buffers = 0;
  for (auto& [key, state] : s.t.optimizer->state()) {
    const auto& m = dynamic_cast<torch::optim::SGDParamState&>(*state).momentum_buffer();
    EXPECT_TRUE(torch::equal(m, q(m, "e5m2")));
    ++buffers;
  }
  EXPECT_EQ(buffers, int(params.size()));
}

// The wrapper's momentum-SGD step fuses the optimizer's update with the state's and masters'
// rounding (emulation/fused_update.h): three steps of it give the parameters and buffers that
// opt.step() and the per-tensor rounding give, bit for bit, the first step (which creates the
// buffers) included; an optimizer the fused step does not compute (RMSprop) is unaffected.
TEST(NumericsWorkload, FusedOptimizerStepIsTheUnfusedOne) {
  // Rows of whole MX blocks and NVFP4 tiles (the emulation refuses others without partial=on).
  const std::string fc = "fc:layers=2,nodes=64,input=64,output=5,batch=16,threads=1,optimizer=";
  for (const std::string numerics :
       {"o:e5m2+m:bf16", "w:mxfp8_e4m3+g:mxfp8_e5m2+o:mxfp8_e5m2+m:mxfp8_e4m3",
        "w:nvfp4_2d+a:nvfp4+e:nvfp4/stochastic+g:nvfp4/stochastic+o:nvfp4+m:nvfp4",
        "o:bf16/stochastic+m:e4m3+ls:dynamic"}) {
    for (const std::string optimizer : {"momentum", "rmsprop"}) {
      std::vector<std::vector<torch::Tensor>> out;
      for (const bool fused : {true, false}) {
        emu::set_fused_updates(fused);
        auto t = prepare_training(parse_config(fc + optimizer + ",numerics=" + numerics),
                                  torch::kCPU, 3);
        const uint64_t before = emu::fused_steps();
        for (int i = 0; i < 3; ++i) train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
        // Momentum's second and third steps fuse (the first creates the buffers), each of the
        // six parameters; nothing else does.
        const char* forced = std::getenv("ATEN_CPU_CAPABILITY");  // baseline kernels: unfused
        const bool fma = !forced || std::string(forced) != "default";
        const uint64_t want = fused && fma && optimizer == "momentum" ? 2 * 6 : 0;
        EXPECT_EQ(emu::fused_steps() - before, want) << numerics << ", " << optimizer;
        std::vector<torch::Tensor> v;
        for (const auto& p : t.workload->module().parameters()) v.push_back(p.detach().clone());
        for (const auto& p : t.workload->module().parameters()) {
          const auto it = t.optimizer->state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
          ASSERT_NE(it, t.optimizer->state().end());
          if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(it->second.get()))
            v.push_back(s->momentum_buffer().clone());
        }
        out.push_back(v);
      }
      emu::set_fused_updates(true);
      ASSERT_EQ(out[0].size(), out[1].size());
      for (size_t i = 0; i < out[0].size(); ++i)
        EXPECT_TRUE(torch::equal(out[0][i], out[1][i]))
            << numerics << ", " << optimizer << ": tensor " << i;
    }
  }
}

// What the fused step leaves to opt.step(): SGD with weight decay (or Nesterov) is not fused,
// and a parameter without a gradient (frozen) is not stepped but still has its master rounded,
// as the unfused step rounds every parameter; the values are the unfused ones either way (the
// masters round stochastically: a call skipped for the frozen one would move every later
// parameter's stream).
TEST(NumericsWorkload, FusedStepLeavesWhatItDoesNotComputeToTheOptimizer) {
  const std::string cfg =
      "fc:layers=2,nodes=48,input=40,output=5,batch=16,threads=1,optimizer=momentum,numerics=o:"
      "e5m2+m:bf16/stochastic";
  for (const bool decay : {true, false}) {
    std::vector<std::vector<torch::Tensor>> out;
    uint64_t fused_count = 0;
    for (const bool fused : {true, false}) {
      emu::set_fused_updates(fused);
      auto t = prepare_training(parse_config(cfg), torch::kCPU, 3);
      auto params = t.workload->module().parameters();
      if (decay) {
        t.optimizer = std::make_unique<torch::optim::SGD>(
            params, torch::optim::SGDOptions(1e-3).momentum(0.9).weight_decay(0.01));
      } else {
        params[1].requires_grad_(false);         // the first layer's bias: no gradient
        params[1].detach().mul_(1.0009765625f);  // off bf16's grid, as a step would leave it
      }
      const uint64_t before = emu::fused_steps();
      for (int i = 0; i < 3; ++i) train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
      if (fused) fused_count = emu::fused_steps() - before;
      std::vector<torch::Tensor> v;
      for (const auto& p : params) v.push_back(p.detach().clone());
      if (!decay) EXPECT_TRUE(torch::equal(v[1], q(v[1], "bf16"))) << "frozen master rounded";
      out.push_back(v);
    }
    emu::set_fused_updates(true);
    for (size_t i = 0; i < out[0].size(); ++i)
      EXPECT_TRUE(torch::equal(out[0][i], out[1][i])) << (decay ? "decay" : "frozen") << " " << i;
    const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
    const bool fma = !forced || std::string(forced) != "default";
    // Weight decay: none fused. Frozen: the five parameters with gradients, twice.
    EXPECT_EQ(fused_count, decay || !fma ? 0u : 2u * 5u) << (decay ? "decay" : "frozen");
  }
}

// WGAN-GP and A3C run their own steps (two optimizers; actors on threads, several updates per
// step); the wrapper's hooks reach every forward pass and update in them.
TEST(NumericsWorkload, OwnStepsTakeTheFormats) {
  auto after = [](const std::string& config) {
    auto t = prepare_training(parse_config(config), torch::kCPU, 3);
    train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
    return t;
  };
  for (const std::string model :
       {"wgan_gp:dim=4,batch=2,critic_iters=2,threads=1", "a3c:actors=2,batch=5,threads=2",
        "a3c:actors=1,batch=5,threads=1"}) {
    SCOPED_TRACE(model);
    const auto t = after(model + ",numerics=o:e5m2+m:bf16+ls:dynamic");
    for (const auto& p : t.workload->module().parameters())
      EXPECT_TRUE(torch::equal(p.detach(), q(p.detach(), "bf16")));
    int states = 0;
    for (auto* opt : t.workload->own_optimizers())
      for (auto& [key, state] : opt->state()) {
        std::vector<torch::Tensor> tensors;
        if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(state.get()))
          tensors = {a->exp_avg(), a->exp_avg_sq()};
        if (auto* r = dynamic_cast<torch::optim::RMSpropParamState*>(state.get()))
          tensors = {r->square_avg()};
        for (const auto& x : tensors) EXPECT_TRUE(torch::equal(x, q(x, "e5m2")));
        states += int(tensors.size());
      }
    EXPECT_GT(states, 0);
    if (model.find("actors=2") != std::string::npos) continue;  // threads: not reproducible
    // The forward passes read e2m1 weights: the update is another one.
    const auto coarse = after(model + ",numerics=w:e2m1+m:bf16").workload->module().parameters();
    const auto fine = after(model + ",numerics=m:bf16").workload->module().parameters();
    bool differs = false;
    for (size_t i = 0; i < fine.size(); ++i) differs = differs || !torch::equal(coarse[i], fine[i]);
    EXPECT_TRUE(differs);
  }
  // Activation formats and operators too: WGAN-GP's gradient penalty differentiates through
  // the rounding and the unit twice, A3C's actors install the points on their threads.
  RunOptions o;
  o.timing.fixed_steps = 1;
  for (const char* model :
       {"wgan_gp:dim=4,batch=2,critic_iters=1,threads=1", "a3c:actors=2,batch=3,threads=2"}) {
    const RunResult r = run_config(
        parse_config(std::string(model) +
                     ",numerics=e4m3+act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=8;order=lanes"),
        o);
    EXPECT_EQ(r.status, Status::kOk) << model << ": " << r.error;
  }
  // With an fp32 unit summing in order, the critic's gradients (the penalty's second-order
  // terms included, which reach the weights only if the unit's backward is differentiable)
  // are the plain ones.
  auto critic_grads = [](const std::string& config) {
    auto t = prepare_training(parse_config(config), torch::kCPU, 3);
    torch::manual_seed(9);  // the same fakes and penalty mixes
    t.workload->loss(t.batch).backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : t.workload->module().parameters())
      if (p.grad().defined()) g.push_back(p.grad().clone());
    return g;
  };
  const std::string wgan = "wgan_gp:dim=4,batch=2,critic_iters=1,threads=1";
  const auto plain = critic_grads(wgan);
  const auto on_unit =
      critic_grads(wgan + ",numerics=unit:mad:mul=fp32;acc=fp32;width=1;order=sequential");
  ASSERT_EQ(on_unit.size(), plain.size());
  ASSERT_FALSE(plain.empty());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(torch::allclose(on_unit[i], plain[i], 1e-3, 1e-6)) << i;
  // Without the penalty's second-order terms the gradients are visibly others.
  const auto no_penalty = critic_grads(wgan + ",lambda=0");
  bool differs = false;
  for (size_t i = 0; i < plain.size(); ++i)
    differs = differs || !torch::allclose(no_penalty[i], plain[i], 1e-3, 1e-6);
  EXPECT_TRUE(differs);
}

TEST(NumericsWorkload, DynamicLossScalingSkipsAStepThatOverflows) {
  // e5m3 has IEEE infinities and overflows to them beyond 61440: errors scaled by 1e6 do.
  const Stepped bad = one_step("sgd", "e:e5m3+ls:dynamic:1000000");
  const auto params = bad.t.workload->module().parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(params[i].detach(), bad.before[i])) << i;
  // The same scale without the overflowing format steps, and unscales the gradients.
  const Stepped good = one_step("sgd", "ls:dynamic:1000000");
  const auto ref = reference_grads(good.before, good.t.batch, "off");
  const auto updated = good.t.workload->module().parameters();
  for (size_t i = 0; i < updated.size(); ++i) {
    EXPECT_FALSE(torch::equal(updated[i].detach(), good.before[i])) << i;
    EXPECT_TRUE(torch::allclose(updated[i].grad(), ref[i], 1e-4, 1e-6)) << i;
  }
}

struct NoPoints : Workload {
  torch::nn::Linear net{2, 2};
  torch::nn::Module& module() override { return *net; }
  Batch make_batch(torch::Device, torch::Dtype, uint64_t) override { return {}; }
  torch::Tensor loss(const Batch&) override { return {}; }
  int64_t examples_per_step() const override { return 1; }
};

struct OwnStep : NoPoints {
  torch::optim::SGD opt{net->parameters(), torch::optim::SGDOptions(0.1)};
  std::vector<torch::optim::Optimizer*> own_optimizers() override { return {&opt}; }
};

TEST(NumericsWorkload, RefusesWhatTheFamilyCannotDo) {
  EXPECT_THROW(emu::with_numerics(std::make_unique<NoPoints>(), num::parse_numerics("a:e4m3"), 1),
               Unsupported);
  EXPECT_THROW(emu::with_numerics(std::make_unique<NoPoints>(), num::parse_numerics("e:e5m2"), 1),
               Unsupported);
  EXPECT_NO_THROW(emu::with_numerics(std::make_unique<NoPoints>(),
                                     num::parse_numerics("w:e4m3+g:e5m2+o:bf16+m:bf16"), 1));
  EXPECT_THROW(emu::with_numerics(std::make_unique<OwnStep>(), num::parse_numerics("w:e4m3"), 1),
               Unsupported);
}

// act: and unit: replace the family's own operators: the logits of an fc config with tanh
// for its ReLUs, and on a MAD unit, against the same network written out by hand.
TEST(NumericsWorkload, FamilyOperatorsRunOnTheEmulatedActivationAndUnit) {
  const std::string base = "fc:layers=1,nodes=6,input=5,output=3,batch=7,threads=1";
  auto plain = prepare_training(parse_config(base), torch::kCPU, 3);
  std::vector<torch::Tensor> w;
  for (const auto& p : plain.workload->module().parameters()) w.push_back(p.detach().clone());
  const auto& x = plain.batch.inputs[0];
  auto logits = [&](const std::string& numerics) {
    auto t = prepare_training(parse_config(base + ",numerics=" + numerics), torch::kCPU, 3);
    torch::NoGradGuard ng;
    return t.workload->logits(t.batch);
  };
  namespace F = torch::nn::functional;
  const auto tanh_ref = F::linear(torch::tanh(F::linear(x, w[0], w[1])), w[2], w[3]);
  EXPECT_TRUE(torch::equal(logits("act:tanh"), tanh_ref));
  // fp32 products and sums in order: the plain network up to the order of the sums.
  const auto relu_ref = F::linear(torch::relu(F::linear(x, w[0], w[1])), w[2], w[3]);
  const auto on_unit = logits("unit:mad:mul=fp32;acc=fp32;width=1;order=sequential");
  EXPECT_TRUE(torch::allclose(on_unit, relu_ref, 1e-5, 1e-6));
  // e2m1 products: the unit's own arithmetic, visibly not fp32's.
  const auto coarse = logits("unit:mad:mul=e2m1;acc=fp32;width=1;order=sequential");
  EXPECT_GT((coarse - relu_ref).abs().max().item<float>(), 1e-3);
  // A cnn trains on the unit and with an approximate activation.
  RunOptions o;
  o.timing.fixed_steps = 2;
  const RunResult cnn = run_config(
      parse_config("cnn:blocks=1,filters=4,image=16,output=3,batch=2,threads=1,"
                   "numerics=act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=4;order=lanes"),
      o);
  EXPECT_EQ(cnn.status, Status::kOk) << cnn.error;
}

// A family that says it has operator points runs every Linear, Conv2d and ReLU of its forward
// pass through them: the override replaces all of them, and no conv, linear or ReLU operator
// runs outside it.
TEST(NumericsWorkload, EveryLayerOfAFamilyWithOperatorPointsReachesThem) {
  for (const char* config :
       {"fc:layers=2,nodes=8,input=5,output=3,batch=2",
        "cnn:blocks=1,filters=4,image=16,output=3,batch=2",
        "cnn:block=residual,blocks=2,filters=4,image=16,output=3,batch=2",
        "resnet50:image=32,classes=5,batch=2", "mobilenet_v2:image=32,classes=5,batch=2",
        "squeezenet1_1:image=32,classes=5,batch=2", "densenet121:image=32,classes=5,batch=2",
        "inception3:image=299,classes=5,batch=2",
        "rnn:cell=lstm,layers=2,embed=8,length=3,vocab=9,batch=2",
        "rnn:cell=gru,embed=8,length=3,vocab=9,batch=2",
        "rnn:cell=rnn,embed=8,length=3,vocab=9,batch=2",
        "deepspeech2:rnn_type=gru,rnn_layers=2,hidden=8,min_frames=20,max_frames=30,batch=2",
        "deepspeech2:rnn_type=rnn,rnn_layers=2,hidden=8,min_frames=20,max_frames=30,batch=2",
        "retinanet:height=64,width=64,batch=1,max_boxes=2",
        "faster_rcnn:height=64,width=64,batch=1,max_boxes=2",
        "seq2seq:layers=2,hidden=8,src_vocab=20,tgt_vocab=16,min_len=2,max_len=4,batch=3",
        "transformer:layers=2,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3",
        "wgan_gp:dim=4,batch=2,critic_iters=1", "a3c:actors=1,batch=3"}) {
    SCOPED_TRACE(config);
    auto t = prepare_training(parse_config(std::string(config) + ",threads=1"), torch::kCPU, 1);
    ASSERT_TRUE(t.workload->has_activation_points());
    const std::string family = parse_config(config).family();
    auto [layers, recurrent, weights] = tb::testing::point_layers(*t.workload);
    const Coverage plain = forward_coverage(*t.workload, t.batch, false);
    EXPECT_GE(plain.escaped.size(), layers.size());
    const Coverage c = forward_coverage(*t.workload, t.batch, true);
    // Every layer's input; linear_op's weights of no Linear module (attention's input
    // projection, the tied output projection) are seen too.
    EXPECT_TRUE(std::includes(c.hooked.begin(), c.hooked.end(), weights.begin(), weights.end()));
    if (family != "transformer") EXPECT_EQ(c.hooked, weights);
    layers.insert(recurrent.begin(), recurrent.end());
    EXPECT_EQ(c.overridden, layers);
    // Recurrent cells have their activations inside (unit_recurrent replaces them).
    if (recurrent.empty()) EXPECT_GT(c.activations, 0);
    EXPECT_EQ(c.products > 0, family == "seq2seq" || family == "transformer");
    EXPECT_TRUE(c.escaped.empty()) << *c.escaped.begin() << " x" << c.escaped.size();
  }
}

// The reference models train on the unit, with an approximate activation and fp8 formats:
// MobileNetV2's depthwise convolutions and ReLU6, Deep Speech 2's packed bidirectional GRUs,
// an rnn's LSTM cells and seq2seq's encoder states, decoder cells and attention included.
TEST(NumericsWorkload, ReferenceModelsTrainOnTheEmulatedUnitAndActivation) {
  RunOptions o;
  o.timing.fixed_steps = 1;
  const std::string numerics =
      ",threads=2,numerics=e4m3+act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=8;order=lanes";
  for (const char* model :
       {"mobilenet_v2:image=32,classes=4,batch=2", "resnet50:image=32,classes=4,batch=2",
        "deepspeech2:rnn_type=gru,rnn_layers=2,hidden=8,min_frames=20,max_frames=30,batch=2",
        "rnn:cell=lstm,layers=2,embed=8,length=5,vocab=9,batch=2",
        "seq2seq:layers=2,hidden=8,src_vocab=20,tgt_vocab=16,min_len=2,max_len=4,batch=3",
        "transformer:layers=1,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3"}) {
    const RunResult r = run_config(parse_config(model + numerics), o);
    EXPECT_EQ(r.status, Status::kOk) << model << ": " << r.error;
  }
  // The activation replaces ReLU6 too: the logits are not the plain network's.
  const std::string config = "mobilenet_v2:image=32,classes=4,batch=2,threads=2";
  auto logits = [&](const std::string& numerics) {
    auto t = prepare_training(parse_config(config + numerics), torch::kCPU, 3);
    torch::NoGradGuard ng;
    t.workload->module().eval();
    return t.workload->logits(t.batch);
  };
  const auto plain = logits(""), tanh = logits(",numerics=act:tanh");
  EXPECT_TRUE(torch::equal(plain, logits(",numerics=act:relu")));
  EXPECT_GT((plain - tanh).abs().max().item<float>(), 0.01 * plain.abs().max().item<float>());
}

// The transformer composed from nn::Transformer's modules for the points is nn::Transformer:
// the same loss in evaluation mode (no dropout) and the same gradients.
TEST(NumericsWorkload, TheTransformerWithPointsIsNnTransformer) {
  auto t = prepare_training(
      parse_config(
          "transformer:layers=2,d_model=16,heads=2,ff=24,vocab=30,seq=7,batch=3,threads=1"),
      torch::kCPU, 5);
  t.workload->module().eval();
  auto params = t.workload->module().parameters();
  auto loss_and_grads = [&](bool points) {
    const ActivationHook identity = [](const torch::Tensor& x, const torch::Tensor*) { return x; };
    std::optional<ActivationHookScope> scope;
    if (points) scope.emplace(&identity);
    for (auto& p : params) p.mutable_grad().reset();
    auto loss = t.workload->loss(t.batch);
    loss.backward();
    std::vector<torch::Tensor> g{loss.detach()};
    for (auto& p : params) g.push_back(p.grad().clone());
    return g;
  };
  const auto plain = loss_and_grads(false), composed = loss_and_grads(true);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(torch::allclose(plain[i], composed[i], 1e-5, 1e-6)) << i;
}

TEST(NumericsWorkload, RunsReportTheirStatusAndKeepTheirConfig) {
  RunOptions o;
  o.timing.fixed_steps = 3;
  const RunResult ok =
      run_config(parse_config("cnn:blocks=1,filters=4,image=16,output=3,batch=2,threads=1,"
                              "numerics=e4m3+ls:dynamic"),
                 o);
  ASSERT_EQ(ok.status, Status::kOk) << ok.error;
  EXPECT_NE(ok.config.find("numerics=e4m3+ls:dynamic"), std::string::npos);
  EXPECT_EQ(parse_config(ok.config).str(), ok.config);
  // What cannot take the policy is refused, with the reason: a traced step has no points.
  RunOptions traced = o;
  traced.stack = parse_stack("mode=torchscript");
  const RunResult refused = run_config(
      parse_config("cnn:blocks=1,filters=4,image=16,output=3,batch=2,threads=1,numerics=a:bf16"),
      traced);
  EXPECT_EQ(refused.status, Status::kUnsupported);
  EXPECT_NE(refused.error.find("no activation points"), std::string::npos) << refused.error;
}

TEST(NumericsWorkload, ProfilesShowTheRoundingAsItsOwnOperatorClass) {
  ProfileOptions o;
  o.warmup_steps = 1;
  o.steps = 2;
  const ProfileRun r = profile_config(
      parse_config("fc:layers=1,nodes=16,input=8,output=4,batch=4,threads=1,numerics=bf16"), o);
  ASSERT_EQ(r.status, Status::kOk) << r.error;
  std::set<std::string> phases;
  for (const auto& op : r.profile.ops)
    if (op.op_class == "quantize") phases.insert(op.phase);
  // Weights and activations in forward, errors in backward, state and masters in the optimizer.
  EXPECT_EQ(phases, (std::set<std::string>{"forward", "backward", "optimizer"}));
}

}  // namespace
