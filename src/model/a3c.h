#pragma once
// A3C's network, exposed for the tests (model/a3c.cc registers the family).
#include <torch/torch.h>

#include <utility>

namespace tb {
class Workload;
namespace a3c {

// The A3C paper's Atari network (that of Mnih et al. 2013): 4x84x84 -> conv 16 8x8/4 ->
// ReLU -> conv 32 4x4/2 -> ReLU -> fc 256 -> ReLU -> softmax policy over the actions and a
// scalar value.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t actions);
  // (policy logits [T, actions], value [T])
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& frames);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc{nullptr}, policy{nullptr}, value{nullptr};
};
TORCH_MODULE(Net);

inline constexpr double kGamma = 0.99, kValueWeight = 0.5, kEntropyWeight = 0.01;

// The actor-critic loss of one rollout: sum over its steps of
// -log pi(a|s) (R - V(s)) - 0.01 H(pi(s)) + 0.5 (R - V(s))^2, with (R - V) held constant
// in the policy term. `returns` are the n-step discounted returns R.
torch::Tensor actor_critic_loss(Net& net, const torch::Tensor& frames, const torch::Tensor& actions,
                                const torch::Tensor& returns);

// Each actor's loss in the last custom step (an a3c workload only).
std::vector<double> last_losses(Workload& w);

}  // namespace a3c
}  // namespace tb
