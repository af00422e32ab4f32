// WGAN-GP (Gulrajani et al. 2017), TBD's adversarial reference model: the residual
// generator and critic of the paper's 64x64 ImageNet experiment (gan_64x64.py, "Good"
// networks). One training step is `critic_iters` critic updates, each on its own batch of
// real images with the gradient penalty, then one generator update.
#include "model/wgan_gp.h"

#include "model/activation_point.h"
#include "model/phase.h"
#include "model/workload.h"

namespace tb {
namespace wgan {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

namespace {

nn::Conv2d conv(int64_t in, int64_t out, int64_t k, bool bias) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).padding(k / 2).bias(bias));
}

// The paper upsamples by depth-to-space of four copies, which is nearest-neighbour 2x.
torch::Tensor up2(const torch::Tensor& x) {
  return F::interpolate(
      x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
}
torch::Tensor pool2(const torch::Tensor& x) { return F::avg_pool2d(x, F::AvgPool2dFuncOptions(2)); }

// Generator block: BN, ReLU, upsample+conv3x3 (no bias), BN, ReLU, conv3x3; the shortcut
// is upsample+conv1x1.
struct UpBlockImpl : nn::Module {
  UpBlockImpl(int64_t in, int64_t out)
      : bn1(register_module("bn1", nn::BatchNorm2d(in))),
        conv1(register_module("conv1", conv(in, out, 3, false))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))),
        conv2(register_module("conv2", conv(out, out, 3, true))),
        shortcut(register_module("shortcut", conv(in, out, 1, true))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = layer_op(conv1, up2(relu_op(bn1(x))));
    h = layer_op(conv2, relu_op(bn2(h)));
    return layer_op(shortcut, up2(x)) + h;
  }
  nn::BatchNorm2d bn1;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn2;
  nn::Conv2d conv2, shortcut;
};
TORCH_MODULE(UpBlock);

// Critic block: LN, ReLU, conv3x3 (no bias), LN, ReLU, conv3x3 + mean pool; the shortcut
// is mean pool + conv1x1. Layer norm over (C, H, W) with a per-channel scale and offset,
// as the paper's critic: batch norm would couple the examples the penalty treats apart.
struct DownBlockImpl : nn::Module {
  DownBlockImpl(int64_t in, int64_t out)
      : ln1(register_module("ln1", nn::GroupNorm(1, in))),
        conv1(register_module("conv1", conv(in, in, 3, false))),
        ln2(register_module("ln2", nn::GroupNorm(1, in))),
        conv2(register_module("conv2", conv(in, out, 3, true))),
        shortcut(register_module("shortcut", conv(in, out, 1, true))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = layer_op(conv1, relu_op(ln1(x)));
    h = pool2(layer_op(conv2, relu_op(ln2(h))));
    return layer_op(shortcut, pool2(x)) + h;
  }
  nn::GroupNorm ln1{nullptr};
  nn::Conv2d conv1;
  nn::GroupNorm ln2{nullptr};
  nn::Conv2d conv2, shortcut;
};
TORCH_MODULE(DownBlock);

}  // namespace

GeneratorImpl::GeneratorImpl(int64_t dim) : dim_(dim) {
  input = register_module("input", nn::Linear(kNoise, 4 * 4 * 8 * dim));
  const int64_t widths[] = {8 * dim, 8 * dim, 4 * dim, 2 * dim, dim};
  for (int i = 0; i < 4; ++i) blocks->push_back(UpBlock(widths[i], widths[i + 1]));
  register_module("blocks", blocks);
  bn = register_module("bn", nn::BatchNorm2d(dim));
  output = register_module("output", conv(dim, 3, 3, true));
}

torch::Tensor GeneratorImpl::forward(const torch::Tensor& z) {
  auto x = layer_op(input, z).view({-1, 8 * dim_, 4, 4});
  x = forward_with_points(blocks, x);
  return torch::tanh(layer_op(output, relu_op(bn(x))));
}

CriticImpl::CriticImpl(int64_t dim) : dim_(dim) {
  input = register_module("input", conv(3, dim, 3, true));
  const int64_t widths[] = {dim, 2 * dim, 4 * dim, 8 * dim, 8 * dim};
  for (int i = 0; i < 4; ++i) blocks->push_back(DownBlock(widths[i], widths[i + 1]));
  register_module("blocks", blocks);
  output = register_module("output", nn::Linear(4 * 4 * 8 * dim, 1));
}

torch::Tensor CriticImpl::forward(const torch::Tensor& x) {
  // The scores are the critic's logits: a point.
  return activation_point(
      layer_op(output, forward_with_points(blocks, layer_op(input, x)).flatten(1)).squeeze(1));
}

WganGp::WganGp(int64_t dim, double lambda) : lambda_(lambda) {
  generator = register_module("generator", Generator(dim));
  critic = register_module("critic", Critic(dim));
}

torch::Tensor WganGp::gradient_penalty(const torch::Tensor& real, const torch::Tensor& fake) {
  const auto eps = torch::rand({real.size(0), 1, 1, 1}, real.options());
  const auto mixed = (eps * real + (1 - eps) * fake).detach().requires_grad_(true);
  const auto score = critic->forward(mixed);
  // create_graph: the penalty is a function of the critic's weights through this gradient,
  // so loss.backward() differentiates the critic twice.
  const auto grad = torch::autograd::grad({score}, {mixed}, {torch::ones_like(score)},
                                          /*retain_graph=*/true, /*create_graph=*/true)[0];
  return (grad.flatten(1).norm(2, 1) - 1).pow(2).mean();
}

torch::Tensor WganGp::critic_loss(const torch::Tensor& real) {
  const int64_t b = real.size(0);
  torch::Tensor fake;
  {
    torch::NoGradGuard no_grad;
    fake = generator->forward(torch::randn({b, kNoise}, real.options()));
  }
  const auto scores = critic->forward(torch::cat({real, fake}));
  auto loss = scores.slice(0, b).mean() - scores.slice(0, 0, b).mean();
  if (lambda_ != 0) loss = loss + lambda_ * gradient_penalty(real, fake);
  return loss;
}

torch::Tensor WganGp::generator_loss(int64_t batch, const torch::TensorOptions& opts) {
  return -critic->forward(generator->forward(torch::randn({batch, kNoise}, opts))).mean();
}

namespace {

void release_grads(nn::Module& m) {
  for (auto& p : m.parameters()) p.mutable_grad().reset();
}

class WganWorkload : public Workload {
 public:
  explicit WganWorkload(const Config& c)
      : net_(std::make_shared<WganGp>(c.get_int("dim"), double(c.get_int("lambda")))),
        batch_(c.get_int("batch")),
        critic_iters_(c.get_int("critic_iters")) {}
  torch::nn::Module& module() override { return *net_; }
  // One batch of real images per critic iteration: the shape of Downsampled ImageNet 64x64,
  // values in the generator's tanh range.
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    Batch b;
    for (int64_t i = 0; i < critic_iters_; ++i)
      b.inputs.push_back(
          torch::rand({batch_, 3, kImage, kImage}, torch::TensorOptions().device(device))
                  .to(dtype) *
              2 -
          1);
    return b;
  }
  torch::Tensor loss(const Batch& b) override { return net_->critic_loss(b.inputs[0]); }
  int64_t examples_per_step() const override { return batch_ * critic_iters_; }

  bool custom_step(torch::optim::Optimizer&, const Batch& b) override {
    make_optimizers();
    for (int64_t i = 0; i < critic_iters_; ++i) {
      release_grads(*net_->critic);
      last_critic_loss = update(*critic_opt_, [&] { return net_->critic_loss(b.inputs[i]); });
    }
    // The generator's update needs the critic's input gradient only.
    for (auto& p : net_->critic->parameters()) p.set_requires_grad(false);
    release_grads(*net_->critic);
    {
      FrozenWeightsScope frozen(net_->critic->parameters());
      last_generator_loss = update(
          *generator_opt_, [&] { return net_->generator_loss(batch_, b.inputs[0].options()); });
    }
    for (auto& p : net_->critic->parameters()) p.set_requires_grad(true);
    return true;
  }
  std::vector<torch::optim::Optimizer*> own_optimizers() override {
    make_optimizers();
    return {critic_opt_.get(), generator_opt_.get()};
  }
  bool takes_step_hooks() const override { return true; }
  bool has_activation_points() const override { return true; }

  // Read only by tests (last_losses): reading them in the step would synchronise an
  // asynchronous device every update.
  torch::Tensor last_critic_loss, last_generator_loss;

 private:
  // One update: the forward and backward passes of loss_of() (under the numerics wrapper's
  // formats and points, when it set its hooks), then opt's step. Returns the loss.
  template <typename Fn>
  torch::Tensor update(torch::optim::Optimizer& opt, Fn loss_of) {
    torch::Tensor loss;
    {
      const auto points = step_hooks_ ? step_hooks_->points() : nullptr;
      double scale = 1;
      {
        PhaseScope phase(Phase::kForward);
        if (step_hooks_) scale = step_hooks_->before_forward(net_->parameters());
        loss = loss_of();
      }
      PhaseScope phase(Phase::kBackward);
      (scale != 1 ? loss * scale : loss).backward();
    }
    PhaseScope phase(Phase::kOptimizer);
    if (step_hooks_)
      step_hooks_->step(opt);
    else
      opt.step();
    return loss.detach();
  }

  // Made on first use, after the runner has moved the module to its device and dtype.
  void make_optimizers() {
    if (critic_opt_) return;
    auto adam = torch::optim::AdamOptions(1e-4).betas({0.0, 0.9});
    critic_opt_ = std::make_unique<torch::optim::Adam>(net_->critic->parameters(), adam);
    generator_opt_ = std::make_unique<torch::optim::Adam>(net_->generator->parameters(), adam);
  }

  std::shared_ptr<WganGp> net_;
  int64_t batch_, critic_iters_;
  std::unique_ptr<torch::optim::Adam> critic_opt_, generator_opt_;
};

const bool wgan_gp_registered =
    (register_builder("wgan_gp", [](const Config& c) { return std::make_unique<WganWorkload>(c); }),
     true);

}  // namespace

double last_losses(Workload& w, double* generator) {
  auto& g = dynamic_cast<WganWorkload&>(w);
  auto value = [](const torch::Tensor& t) { return t.defined() ? t.item<double>() : 0.0; };
  if (generator) *generator = value(g.last_generator_loss);
  return value(g.last_critic_loss);
}

}  // namespace wgan
}  // namespace tb
