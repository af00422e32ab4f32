// A3C (Mnih et al. 2016), TBD's reinforcement-learning reference model, on a Pong-like
// game that renders real frames (model/atari_env.h). `actors` threads, each with its own
// game, random stream and local copy of the network, roll out `batch` (= t_max) agent
// steps, compute the actor-critic gradient of their rollout locally and apply it to the
// shared network with a shared RMSprop.
//
// One runner step = every actor doing one rollout and one update. The actors run
// concurrently, in three phases the step marks (so profiles and memory breakdowns can
// attribute their work; the phase marker is process-wide): forward = copy the shared
// weights, act t_max times (one forward per action, plus one for the bootstrap value) and
// the training forward over the rollout; backward = each actor's backward on its local
// copy; optimizer = the actors' gradients applied to the shared weights one after
// another, in actor order (the "short lock" around the shared update, made deterministic).
// As in A3C, an actor's gradient is computed on weights the other actors' updates have
// since moved: with N actors the last update of a step is N-1 updates stale.
#include "model/a3c.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "model/activation_point.h"
#include "model/atari_env.h"
#include "model/phase.h"
#include "model/workload.h"

namespace tb {
namespace a3c {

namespace nn = torch::nn;

NetImpl::NetImpl(int64_t actions) {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(PongEnv::kStack, 16, 8).stride(4)));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 4).stride(2)));
  fc = register_module("fc", nn::Linear(32 * 9 * 9, 256));
  policy = register_module("policy", nn::Linear(256, actions));
  value = register_module("value", nn::Linear(256, 1));
}

std::pair<torch::Tensor, torch::Tensor> NetImpl::forward(const torch::Tensor& frames) {
  auto h = relu_op(layer_op(conv2, relu_op(layer_op(conv1, frames))));
  h = relu_op(layer_op(fc, h.flatten(1)));
  // The two heads' outputs are the network's logits: points.
  return {activation_point(layer_op(policy, h)), activation_point(layer_op(value, h)).squeeze(1)};
}

torch::Tensor actor_critic_loss(Net& net, const torch::Tensor& frames, const torch::Tensor& actions,
                                const torch::Tensor& returns) {
  auto [logits, values] = net->forward(frames);
  const auto logp = torch::log_softmax(logits, 1);
  const auto advantage = returns - values;
  const auto policy = -(logp.gather(1, actions.unsqueeze(1)).squeeze(1) * advantage.detach()).sum();
  const auto entropy = -(logp.exp() * logp).sum();
  return policy - kEntropyWeight * entropy + kValueWeight * advantage.pow(2).sum();
}

namespace {

struct Rollout {
  torch::Tensor frames, actions, returns;
};

struct Actor {
  Actor(uint64_t seed, int64_t actions)
      : env(seed), rng(seed ^ 0x9e3779b97f4a7c15ull), local(actions) {}
  PongEnv env;
  std::mt19937_64 rng;
  Net local;
  torch::Tensor loss;
  // Kept as a tensor and read only by tests (last_losses): reading it in the step would
  // synchronise an asynchronous device every update.
  torch::Tensor last_loss;
};

torch::Tensor observation(const PongEnv& env, const torch::TensorOptions& opts) {
  const auto& o = env.observation();
  return torch::from_blob(const_cast<float*>(o.data()),
                          {1, PongEnv::kStack, PongEnv::kSide, PongEnv::kSide}, torch::kFloat)
      .to(opts, /*non_blocking=*/false, /*copy=*/true);
}

// t_max agent steps; an episode that ends inside the rollout cuts the returns there and
// the game restarts, so every rollout has exactly t_max steps (4 t_max frames).
Rollout roll_out(PongEnv& env, Net& net, int64_t t_max, std::mt19937_64& rng,
                 const torch::TensorOptions& opts) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> frames;
  std::vector<int64_t> actions;
  std::vector<float> rewards;
  std::vector<bool> done;
  std::uniform_real_distribution<double> uniform(0, 1);
  for (int64_t t = 0; t < t_max; ++t) {
    frames.push_back(observation(env, opts));
    const auto probs = torch::softmax(net->forward(frames.back()).first, 1).to(torch::kCPU);
    const auto p = probs.accessor<float, 2>();
    double u = uniform(rng);
    int64_t a = 0;
    while (a + 1 < p.size(1) && (u -= p[0][a]) > 0) ++a;
    const auto r = env.step(int(a));
    actions.push_back(a);
    rewards.push_back(std::clamp(r.reward, -1.0f, 1.0f));
    done.push_back(r.done);
    if (r.done) env.reset();
  }
  double ret = done.back() ? 0.0 : net->forward(observation(env, opts)).second.item<double>();
  std::vector<float> returns(static_cast<size_t>(t_max));
  for (int64_t t = t_max - 1; t >= 0; --t) {
    ret = rewards[t] + (done[t] ? 0.0 : kGamma * ret);
    returns[t] = float(ret);
  }
  return {torch::cat(frames), torch::tensor(actions, opts.dtype(torch::kLong)),
          torch::tensor(returns).to(opts)};
}

class A3cWorkload : public Workload {
 public:
  explicit A3cWorkload(const Config& c)
      : shared_(PongEnv::kActions), actors_n_(c.get_int("actors")), t_max_(c.get_int("batch")) {}
  torch::nn::Module& module() override { return *shared_; }

  // A rollout of one game under a uniformly random policy, for loss(); the actors, made
  // here (the module is on its device by now), play their own games, seeded from `seed`.
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    make_actors(seed);
    PongEnv env(seed);
    std::mt19937_64 rng(seed);
    Net uniform(PongEnv::kActions);
    for (auto& p : uniform->parameters()) p.detach().zero_();  // equal logits
    uniform->to(device);
    const auto r = roll_out(env, uniform, t_max_, rng, torch::TensorOptions().device(device));
    return {{r.frames.to(dtype), r.returns.to(dtype)}, r.actions};
  }
  torch::Tensor loss(const Batch& b) override {
    return actor_critic_loss(shared_, b.inputs[0], b.target, b.inputs[1]);
  }
  int64_t examples_per_step() const override { return actors_n_ * t_max_; }  // agent steps
  // Emulated frames, the 3 skipped ones of each agent step included (ALE's convention).
  double units_per_step() const override {
    return double(actors_n_ * t_max_ * PongEnv::kFrameSkip);
  }

  bool custom_step(torch::optim::Optimizer&, const Batch&) override {
    make_actors(0);
    const auto opts = shared_->parameters().front().options();
    const auto shared = shared_->parameters();
    double scale = 1;
    {
      PhaseScope phase(Phase::kForward);
      // The actors copy the shared weights in their emulated format.
      if (step_hooks_) scale = step_hooks_->before_forward(shared);
      run_actors([&](Actor& a) {
        // Each actor's thread has its own (thread-local) points.
        const auto points = step_hooks_ ? step_hooks_->points() : nullptr;
        const auto local = a.local->parameters();
        {
          torch::NoGradGuard no_grad;
          for (size_t i = 0; i < local.size(); ++i) local[i].copy_(shared[i]);
        }
        const Rollout r = roll_out(a.env, a.local, t_max_, a.rng, opts);
        a.loss = actor_critic_loss(a.local, r.frames, r.actions, r.returns);
      });
    }
    {
      PhaseScope phase(Phase::kBackward);
      run_actors([scale](Actor& a) { (scale != 1 ? a.loss * scale : a.loss).backward(); });
    }
    {
      PhaseScope phase(Phase::kOptimizer);
      for (auto& a : actors_) {
        auto local = a->local->parameters();
        for (size_t i = 0; i < local.size(); ++i) {
          shared[i].mutable_grad() = local[i].grad();
          local[i].mutable_grad().reset();  // else the next backward accumulates into it
        }
        if (step_hooks_)
          step_hooks_->step(*optimizer_);
        else
          optimizer_->step();
        a->last_loss = a->loss.detach();
        a->loss = torch::Tensor();
      }
    }
    return true;
  }
  std::vector<torch::optim::Optimizer*> own_optimizers() override {
    make_actors(0);
    return {optimizer_.get()};
  }
  bool takes_step_hooks() const override { return true; }
  bool has_activation_points() const override { return true; }

  std::vector<double> losses() const {
    std::vector<double> out;
    for (const auto& a : actors_)
      out.push_back(a->last_loss.defined() ? a->last_loss.item<double>() : 0.0);
    return out;
  }

 private:
  void make_actors(uint64_t seed) {
    if (optimizer_) return;
    // The A3C paper's shared RMSprop: decay 0.99, eps 0.1, no momentum.
    optimizer_ = std::make_unique<torch::optim::RMSprop>(
        shared_->parameters(), torch::optim::RMSpropOptions(7e-4).alpha(0.99).eps(0.1));
    const auto opts = shared_->parameters().front().options();
    for (int64_t k = 0; k < actors_n_; ++k) {
      actors_.push_back(
          std::make_unique<Actor>(seed * 1000003 + uint64_t(k) + 1, PongEnv::kActions));
      actors_.back()->local->to(opts.device(), opts.dtype().toScalarType());
    }
  }

  // Each actor on its own thread with an equal share of the config's intra-op threads (at
  // least one); the caller's thread-local state (grad mode, a listening profiler) goes along.
  template <typename Fn>
  void run_actors(Fn fn) {
    if (actors_.size() == 1) return fn(*actors_[0]);
    const int per_actor = std::max<int>(1, at::get_num_threads() / int(actors_.size()));
    const at::ThreadLocalState state;
    std::vector<std::exception_ptr> errors(actors_.size());
    std::vector<std::thread> threads;
    for (size_t k = 0; k < actors_.size(); ++k)
      threads.emplace_back([&, k] {
        at::ThreadLocalStateGuard guard(state);
        at::set_num_threads(per_actor);
        try {
          fn(*actors_[k]);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  Net shared_;
  int64_t actors_n_, t_max_;
  std::unique_ptr<torch::optim::RMSprop> optimizer_;
  std::vector<std::unique_ptr<Actor>> actors_;
};

const bool a3c_registered =
    (register_builder("a3c", [](const Config& c) { return std::make_unique<A3cWorkload>(c); }),
     true);

}  // namespace

std::vector<double> last_losses(Workload& w) { return dynamic_cast<A3cWorkload&>(w).losses(); }

}  // namespace a3c
}  // namespace tb
