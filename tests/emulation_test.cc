// The emulation phase: extensions loaded by path, approximate activations, the MAD unit under
// autograd, Fashion-MNIST, iterations-to-accuracy and its summary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "base/errors.h"
#include "emulation/emulate.h"
#include "emulation/fashion_mnist.h"
#include "emulation/numerics_workload.h"
#include "numerics/extension.h"
#include "numerics/policy.h"
#include "numerics/quantize.h"

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tb::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Extension, LoadsAndComputes) {
  const auto e = tb::num::Extension::load(TB_EXT_GOOD);
  EXPECT_EQ(e->name(), "test-bf16");
  EXPECT_TRUE(e->has_activation());
  std::vector<float> x = {1.0f, 3.14159f, -2.5e-3f, 65504.0f}, y(4);
  e->round(x.data(), y.data(), 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i], tb::num::quantize_one(tb::num::parse_format("bf16"), x[i]));
  // [1 2; 3 4] x [1; 1] with every MAD rounded to bfloat16.
  const float A[] = {1, 2, 3, 4}, B[] = {1, 1};
  float C[2];
  e->matmul(A, B, C, 2, 1, 2);
  EXPECT_EQ(C[0], 3.0f);
  EXPECT_EQ(C[1], 7.0f);
}

TEST(Extension, BadLibrariesGetClearErrors) {
  const std::string missing = error_of([] { tb::num::Extension::load(TB_EXT_INCOMPLETE); });
  EXPECT_NE(missing.find("lacks tb_mul, tb_mad"), std::string::npos) << missing;
  const std::string nofile = error_of([] { tb::num::Extension::load("/nonexistent/libx.so"); });
  EXPECT_NE(nofile.find("cannot load extension '/nonexistent/libx.so'"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/not_a_library.so";
  std::ofstream(path) << "hello";
  const std::string garbage = error_of([&] { tb::num::Extension::load(path); });
  EXPECT_NE(garbage.find("cannot load extension"), std::string::npos) << garbage;
  tb::emu::Policy p;
  EXPECT_NE(error_of([&] { p.set_unit("ext:/nonexistent.so"); }).find("cannot load"),
            std::string::npos);
  EXPECT_NE(error_of([&] { p.set_activation("softplus"); }).find("softplus"), std::string::npos);
}

// A point's own seed (`--quant-seed`) and the run's stream both pick the stochastic bits.
TEST(Emulation, StochasticStreamMixesThePointSeedWithTheRuns) {
  const auto x = torch::rand({4096}) * 3;
  auto bits = [&](uint64_t point_seed, uint64_t run_stream) {
    auto q = tb::emu::QuantPoint::parse("e5m2/stochastic", point_seed);
    q.reseed(run_stream);
    return q.apply(x);
  };
  EXPECT_TRUE(torch::equal(bits(1, 5), bits(1, 5)));
  EXPECT_FALSE(torch::equal(bits(1, 5), bits(2, 5)));
  EXPECT_FALSE(torch::equal(bits(1, 5), bits(1, 6)));
}

TEST(Emulation, ApproximateActivationsAndTheirGradients) {
  const auto x = torch::linspace(-6, 6, 1201).requires_grad_(true);
  for (const char* name : {"tanh-pwl", "sigmoid-pwl"}) {
    const auto y = tb::emu::approx_activation(x, name);
    const auto exact = std::string(name) == "tanh-pwl" ? torch::tanh(x) : torch::sigmoid(x);
    EXPECT_LT((y - exact).abs().max().item<float>(), 0.01f) << name;
    y.sum().backward();
    // The gradient is the local slope: compare with a centred difference away from knots.
    const auto g = x.grad().clone();
    x.mutable_grad() = torch::Tensor();
    const float h = 1e-3f;
    for (float at : {-3.1f, -0.6f, 0.1f, 1.37f}) {
      const auto p = torch::tensor({at + h}), m = torch::tensor({at - h});
      const float fd = (tb::emu::approx_activation(p, name) - tb::emu::approx_activation(m, name))
                           .item<float>() /
                       (2 * h);
      const int64_t i = int64_t(std::lround((at + 6) * 100));
      EXPECT_NEAR(g[i].item<float>(), fd, 2e-3) << name << " at " << at;
    }
  }
}

TEST(Emulation, SummaryFollowsDawnBenchAndMlperf) {
  std::vector<tb::emu::SeedRun> runs(5);
  const int64_t its[] = {500, 300, 400, 900, 600};
  for (int i = 0; i < 5; ++i) runs[i].iterations = its[i];
  auto s = tb::emu::summarize_seeds(runs);
  EXPECT_EQ(s.reached, 5);
  EXPECT_DOUBLE_EQ(s.mean, 540);
  EXPECT_DOUBLE_EQ(*s.mlperf_mean, 500);  // (400 + 500 + 600) / 3
  EXPECT_DOUBLE_EQ(s.median, 500);
  runs[3].iterations.reset();  // never reached: no MLPerf mean, no pretend number
  s = tb::emu::summarize_seeds(runs);
  EXPECT_EQ(s.reached, 4);
  EXPECT_FALSE(s.mlperf_mean.has_value());
}

TEST(Emulation, FashionMnistLoads) {
  if (!std::ifstream(std::string(tb::emu::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const auto test = tb::emu::load_fashion_mnist("test");
  EXPECT_EQ(test.images.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(test.labels.size(0), 10000);
  EXPECT_EQ(test.labels.max().item<int64_t>(), 9);
  EXPECT_NEAR(test.images.mean().item<float>(), 0.0f, 0.05f);
  EXPECT_THROW(tb::emu::load_fashion_mnist("test", "/nonexistent"), tb::UsageError);
}

TEST(Emulation, IterationsToAccuracyIsReproducibleAndReportsMisses) {
  if (!std::ifstream(std::string(tb::emu::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  tb::emu::EmulationOptions o;
  o.target = 0.70;
  o.eval_every = 25;
  o.max_iters = 300;
  o.eval_examples = 1000;
  o.seeds = 2;
  tb::emu::Policy p;
  const auto a = tb::emu::emulate(o, p);
  ASSERT_EQ(a.summary.reached, 2);
  const auto b = tb::emu::emulate(o, p);
  EXPECT_EQ(*a.runs[0].iterations, *b.runs[0].iterations);  // same seed, same count
  // fp8 at every point, stochastic rounding on the gradients, dynamic loss scaling.
  tb::emu::Policy q;
  q.weights = q.activations = q.master = tb::emu::QuantPoint::parse("e4m3");
  q.errors = q.weight_grads = q.optimizer_state = tb::emu::QuantPoint::parse("e5m2/stochastic", 3);
  q.loss_scale = "dynamic:1024";
  o.seeds = 1;
  const auto c = tb::emu::emulate(o, q);
  EXPECT_TRUE(c.runs[0].iterations.has_value()) << c.runs[0].best_accuracy;
  // An unreachable target is reported as not reached.
  o.target = 0.99;
  o.max_iters = 50;
  const auto d = tb::emu::emulate(o, p);
  EXPECT_FALSE(d.runs[0].iterations.has_value());
  EXPECT_EQ(d.summary.reached, 0);
}

TEST(Emulation, AFamilyConfigTrainsToAccuracyWithItsFormats) {
  if (!std::ifstream(std::string(tb::emu::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  tb::emu::EmulationOptions o;
  o.model = "fc:layers=1,nodes=64,input=784,output=10";
  o.target = 0.70;
  o.eval_every = 25;
  o.max_iters = 400;
  o.eval_examples = 1000;
  o.seeds = 1;
  const auto plain = tb::emu::emulate(o, {});
  ASSERT_TRUE(plain.runs[0].iterations.has_value()) << plain.runs[0].best_accuracy;
  // The stored model is the config as trained.
  EXPECT_EQ(plain.options.model,
            "fc:layers=1,nodes=64,input=784,output=10,batch=64,dtype=fp32,optimizer=momentum,"
            "threads=0,device=cpu");
  EXPECT_EQ(tb::emu::emulate(o, {}).runs[0].curve, plain.runs[0].curve);  // reproducible
  tb::emu::Policy q;
  q.weights = q.activations = tb::emu::QuantPoint::parse("e4m3");
  q.errors = q.weight_grads = tb::emu::QuantPoint::parse("e5m2");
  q.loss_scale = "dynamic:1024";
  const auto fp8 = tb::emu::emulate(o, q);
  EXPECT_TRUE(fp8.runs[0].iterations.has_value()) << fp8.runs[0].best_accuracy;
  EXPECT_NE(fp8.runs[0].curve, plain.runs[0].curve);  // the formats changed the training
  // A format too coarse to train reaches nothing: the points are really applied.
  tb::emu::Policy coarse;
  coarse.weights = tb::emu::QuantPoint::parse("fixed:w=2,f=0");
  o.max_iters = 100;
  const auto bad = tb::emu::emulate(o, coarse);
  EXPECT_LT(bad.runs[0].best_accuracy, 0.5);
  // Shapes that do not fit the data.
  EXPECT_NE(error_of([&] {
              o.model = "cnn:image=224,output=10";
              tb::emu::emulate(o, {});
            }).find("image=224"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              o.model = "rnn:cell=lstm";
              tb::emu::emulate(o, {});
            }).find("only the fc and cnn families"),
            std::string::npos);
  // A family model's layers run on a MAD unit with an approximate activation too.
  tb::emu::Policy mad;
  mad.set_unit("mad:mul=e5m2,acc=fp16,width=4,order=lanes");
  mad.set_activation("tanh-pwl");
  o.model = "cnn:blocks=1,filters=4,image=28,output=10";
  o.max_iters = 6;
  o.eval_every = 3;
  o.eval_examples = 200;
  const auto on_unit = tb::emu::emulate(o, mad);
  ASSERT_EQ(on_unit.runs[0].curve.size(), 2u);
  EXPECT_NE(on_unit.runs[0].curve, tb::emu::emulate(o, {}).runs[0].curve);
}

// The unit's convolution (im2col and a product per group) is torch::conv2d's for every
// geometry the reference models use: strides, padding, dilation, groups and depthwise, with
// the same gradients, when the unit's arithmetic is fp32 in order.
TEST(Emulation, UnitConvolutionsTakeAnyGeometry) {
  tb::emu::Policy fp32;
  fp32.set_unit("mad:mul=fp32,acc=fp32,width=1,order=sequential");
  struct Case {
    int64_t in, out, k, stride, pad, dilation, groups;
  };
  for (const Case c :
       {Case{4, 6, 3, 1, 1, 1, 1}, Case{4, 6, 3, 2, 0, 1, 2}, Case{6, 6, 3, 1, 1, 1, 6},
        Case{6, 12, 3, 2, 1, 1, 6}, Case{4, 4, 3, 1, 2, 2, 1}, Case{4, 8, 1, 2, 0, 1, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << "in " << c.in << " out " << c.out << " k " << c.k << " stride " << c.stride
                 << " pad " << c.pad << " dilation " << c.dilation << " groups " << c.groups);
    torch::manual_seed(7);
    auto x = torch::randn({2, c.in, 9, 9}).requires_grad_(true);
    auto w = torch::randn({c.out, c.in / c.groups, c.k, c.k}).requires_grad_(true);
    auto b = torch::randn({c.out}).requires_grad_(true);
    tb::ConvOptions shape;
    shape.stride = {c.stride, c.stride};
    shape.pad = {c.pad, c.pad};
    shape.dilation = {c.dilation, c.dilation};
    shape.groups = c.groups;
    const auto y = tb::emu::unit_conv2d(x, w, b, shape, fp32);
    const auto ref = torch::conv2d(x, w, b, c.stride, c.pad, c.dilation, c.groups);
    ASSERT_EQ(y.sizes(), ref.sizes());
    EXPECT_TRUE(torch::allclose(y, ref, 1e-4, 1e-5));
    const auto dy = torch::randn_like(ref);
    const auto g = torch::autograd::grad({y}, {x, w, b}, {dy});
    const auto r = torch::autograd::grad({ref}, {x, w, b}, {dy});
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(g[i], r[i], 1e-4, 1e-4)) << i;
  }
}

// Recurrent modules written out step by step are LibTorch's fused ones, forward and backward,
// when the unit's arithmetic is fp32 in order; the point sees every product's input.
TEST(Emulation, UnitRecurrentCellsAreTheFusedOnes) {
  namespace nn = torch::nn;
  tb::emu::Policy fp32;
  fp32.set_unit("mad:mul=fp32,acc=fp32,width=1,order=sequential");
  struct Case {
    std::string name;
    nn::AnyModule cells;
    int directions;
    bool batch_first;
  };
  const int64_t in = 5, hidden = 6, length = 4, batch = 3, layers = 2;
  torch::manual_seed(11);
  std::vector<Case> cases = {
      {"lstm", nn::AnyModule(nn::LSTM(nn::LSTMOptions(in, hidden).num_layers(layers))), 1, false},
      {"gru bidirectional",
       nn::AnyModule(nn::GRU(nn::GRUOptions(in, hidden).num_layers(layers).bidirectional(true))), 2,
       false},
      {"rnn tanh batch-first",
       nn::AnyModule(nn::RNN(nn::RNNOptions(in, hidden).num_layers(layers).batch_first(true))), 1,
       true},
      {"rnn relu bidirectional no bias",
       nn::AnyModule(nn::RNN(nn::RNNOptions(in, hidden)
                                 .num_layers(layers)
                                 .nonlinearity(torch::kReLU)
                                 .bidirectional(true)
                                 .bias(false))),
       2, false}};
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto x = torch::randn(c.batch_first ? std::vector<int64_t>{batch, length, in}
                                        : std::vector<int64_t>{length, batch, in})
                 .requires_grad_(true);
    torch::Tensor fused;
    if (auto* l = c.cells.ptr()->as<nn::LSTM>()) fused = std::get<0>(l->forward(x));
    if (auto* g = c.cells.ptr()->as<nn::GRU>()) fused = std::get<0>(g->forward(x));
    if (auto* r = c.cells.ptr()->as<nn::RNN>()) fused = std::get<0>(r->forward(x));
    int points = 0;
    const auto stepped =
        tb::emu::unit_recurrent(x, {}, {}, *c.cells.ptr(), fp32, [&](const torch::Tensor& t) {
          ++points;
          return t;
        }).output;
    ASSERT_EQ(stepped.sizes(), fused.sizes());
    EXPECT_TRUE(torch::allclose(stepped, fused, 1e-5, 1e-6));
    EXPECT_EQ(points, layers * c.directions * (1 + length));
    std::vector<torch::Tensor> wrt{x};
    for (auto& p : c.cells.ptr()->parameters()) wrt.push_back(p);
    const auto dy = torch::randn_like(fused);
    const auto g = torch::autograd::grad({stepped}, wrt, {dy});
    const auto r = torch::autograd::grad({fused}, wrt, {dy});
    for (size_t i = 0; i < wrt.size(); ++i)
      EXPECT_TRUE(torch::allclose(g[i], r[i], 1e-4, 1e-5)) << i;
  }
  // Padded sequences: the fused module on packed ones, with zeros beyond each end.
  {
    nn::GRU gru(nn::GRUOptions(in, hidden).num_layers(layers).bidirectional(true));
    const auto x = torch::randn({length, batch, in}).requires_grad_(true);
    const auto lengths = torch::tensor({4, 2, 1}, torch::kLong);
    const auto packed = torch::nn::utils::rnn::pack_padded_sequence(x, lengths);
    const auto fused = std::get<0>(torch::nn::utils::rnn::pad_packed_sequence(
        std::get<0>(gru->forward_with_packed_input(packed)), false, 0.0, length));
    const auto stepped =
        tb::emu::unit_recurrent(x, lengths, {}, *gru, fp32, [](const torch::Tensor& t) {
          return t;
        }).output;
    EXPECT_TRUE(torch::allclose(stepped, fused, 1e-5, 1e-6));
    const auto dy = torch::randn_like(fused);
    EXPECT_TRUE(torch::allclose(torch::autograd::grad({stepped}, {x}, {dy})[0],
                                torch::autograd::grad({fused}, {x}, {dy})[0], 1e-4, 1e-5));
  }
  // Final states (a bidirectional LSTM on packed sequences, from a given state) and single
  // cell steps are the fused ones too.
  {
    nn::LSTM lstm(nn::LSTMOptions(in, hidden).num_layers(layers).bidirectional(true));
    const auto x = torch::randn({length, batch, in});
    const auto lengths = torch::tensor({4, 3, 1}, torch::kLong);
    const auto packed = torch::nn::utils::rnn::pack_padded_sequence(x, lengths);
    const auto fused = std::get<1>(lstm->forward_with_packed_input(packed));
    const auto ident = [](const torch::Tensor& t) { return t; };
    const auto stepped = tb::emu::unit_recurrent(x, lengths, {}, *lstm, fp32, ident).state;
    EXPECT_TRUE(torch::allclose(stepped.h, std::get<0>(fused), 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(stepped.c, std::get<1>(fused), 1e-5, 1e-6));
    nn::LSTMCell cell(in, hidden);
    const auto h0 = torch::randn({batch, hidden}), c0 = torch::randn({batch, hidden});
    const auto [h1, c1] = cell->forward(x[0], std::make_tuple(h0, c0));
    const auto step = tb::emu::unit_recurrent(x[0], {}, {h0, c0}, *cell, fp32, ident);
    EXPECT_TRUE(torch::allclose(step.state.h, h1, 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(step.state.c, c1, 1e-5, 1e-6));
    EXPECT_TRUE(torch::equal(step.output, step.state.h));
    nn::GRUCell gru_cell(in, hidden);
    EXPECT_TRUE(
        torch::allclose(tb::emu::unit_recurrent(x[1], {}, {h0, {}}, *gru_cell, fp32, ident).output,
                        gru_cell->forward(x[1], h0), 1e-5, 1e-6));
  }
  // Products of two activations: matmul's, batched or not, with its gradients.
  {
    const auto a = torch::randn({3, 2, 4, 5}).requires_grad_(true);
    const auto b = torch::randn({3, 2, 5, 6}).requires_grad_(true);
    const auto y = tb::emu::unit_matmul(a, b, fp32), ref = torch::matmul(a, b);
    EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-5));
    const auto dy = torch::randn_like(ref);
    const auto g = torch::autograd::grad({y}, {a, b}, {dy});
    const auto r = torch::autograd::grad({ref}, {a, b}, {dy});
    EXPECT_TRUE(torch::allclose(g[0], r[0], 1e-4, 1e-5));
    EXPECT_TRUE(torch::allclose(g[1], r[1], 1e-4, 1e-5));
    // A Linear on a batch of sequences: leading dimensions are rows.
    const auto w = torch::randn({7, 5}), bias = torch::randn({7});
    EXPECT_TRUE(torch::allclose(tb::emu::unit_linear(a, w, bias, fp32),
                                torch::nn::functional::linear(a, w, bias), 1e-5, 1e-5));
    const auto m = torch::randn({5, 7});
    EXPECT_TRUE(torch::allclose(tb::emu::unit_matmul(a, m, fp32), torch::matmul(a, m), 1e-5, 1e-5));
  }
  // The approximate tanh reaches the cells: an LSTM's output moves.
  tb::emu::Policy pwl;
  pwl.set_activation("tanh-pwl");
  const auto x = torch::randn({length, batch, in});
  nn::LSTM lstm(nn::LSTMOptions(in, hidden));
  const auto ident = [](const torch::Tensor& t) { return t; };
  const auto exact = tb::emu::unit_recurrent(x, {}, {}, *lstm, {}, ident).output;
  EXPECT_TRUE(torch::allclose(exact, std::get<0>(lstm->forward(x)), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(tb::emu::unit_recurrent(x, {}, {}, *lstm, pwl, ident).output, exact,
                               1e-4, 1e-5));
}

TEST(Emulation, MadUnitAndExtensionTrainTheMlp) {
  if (!std::ifstream(std::string(tb::emu::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  tb::emu::EmulationOptions o;
  o.target = 0.6;
  o.eval_every = 10;
  o.max_iters = 60;
  o.eval_examples = 200;
  o.batch = 16;
  o.seeds = 1;
  for (const char* unit : {"mad:mul=e5m2,acc=fp16,width=4,order=lanes", "ext:" TB_EXT_GOOD}) {
    tb::emu::Policy p;
    p.set_unit(unit);
    p.set_activation(std::string(unit).rfind("ext:", 0) == 0 ? unit : "tanh-pwl");
    const auto r = tb::emu::emulate(o, p);
    EXPECT_GT(r.runs[0].best_accuracy, 0.4) << unit;
  }
}

}  // namespace

// The built-in networks run their Linear layers as Transformer Engine's Linear with the random
// Hadamard transform (rht_linear): with nothing rounded they train as without it, and with
// NVFP4 points the transform's seed changes the training.
TEST(Emulation, TheBuiltInNetworksTakeTheHadamardTransform) {
  if (!std::ifstream(std::string(tb::emu::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  tb::emu::EmulationOptions o;
  o.eval_every = 20;
  o.max_iters = 60;
  o.eval_examples = 1000;
  o.target = 0.99;
  o.seeds = 1;
  for (const char* model : {"mlp", "cnn"}) {
    o.model = model;
    const auto plain = tb::emu::emulate(o, {});
    const auto rht =
        tb::emu::emulate(o, tb::emu::policy_from(tb::num::parse_numerics("rht:16"), 0));
    ASSERT_EQ(rht.runs[0].curve.size(), plain.runs[0].curve.size());
    for (size_t i = 0; i < plain.runs[0].curve.size(); ++i)
      EXPECT_NEAR(rht.runs[0].curve[i].second, plain.runs[0].curve[i].second, 0.02) << model;
    // The CNN's images and feature maps have rows of 28 and 14: tiles of 16 need partial=on.
    const std::string fp4 =
        std::string(model) == "cnn" ? "nvfp4:block=16;rows=1;partial=on" : "nvfp4";
    const std::string points = "a:" + fp4 + "+e:" + fp4;
    const auto a =
        tb::emu::emulate(o, tb::emu::policy_from(tb::num::parse_numerics(points + "+rht:16"), 0));
    const auto b =
        tb::emu::emulate(o, tb::emu::policy_from(tb::num::parse_numerics(points + "+rht:16:9"), 0));
    EXPECT_NE(a.runs[0].curve, b.runs[0].curve) << model;
    EXPECT_GT(a.runs[0].best_accuracy, 0.5) << model;
  }
}
