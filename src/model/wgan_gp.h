#pragma once
// WGAN-GP's networks, exposed for the tests (model/wgan_gp.cc registers the family).
#include <torch/torch.h>

namespace tb {
class Workload;
namespace wgan {

inline constexpr int64_t kNoise = 128;  // the generator's input, as in the paper
inline constexpr int64_t kImage = 64;   // Downsampled ImageNet 64x64

struct GeneratorImpl : torch::nn::Module {
  explicit GeneratorImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& z);
  int64_t dim_;
  torch::nn::Linear input{nullptr};
  torch::nn::Sequential blocks;
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Conv2d output{nullptr};
};
TORCH_MODULE(Generator);

struct CriticImpl : torch::nn::Module {
  explicit CriticImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t dim_;
  torch::nn::Conv2d input{nullptr};
  torch::nn::Sequential blocks;
  torch::nn::Linear output{nullptr};
};
TORCH_MODULE(Critic);

struct WganGp : torch::nn::Module {
  WganGp(int64_t dim, double lambda);
  // mean ||d critic(x) / dx|| - 1)^2 over random interpolates of real and fake, with the
  // graph kept so that it can be differentiated with respect to the critic's weights.
  torch::Tensor gradient_penalty(const torch::Tensor& real, const torch::Tensor& fake);
  // critic(fake) - critic(real) + lambda * penalty, fakes from fresh noise (no gradient).
  torch::Tensor critic_loss(const torch::Tensor& real);
  torch::Tensor generator_loss(int64_t batch, const torch::TensorOptions& opts);
  double lambda_;
  Generator generator{nullptr};
  Critic critic{nullptr};
};

// The critic's loss of the last critic update of the last custom step, and the
// generator's (a wgan_gp workload only).
double last_losses(Workload& w, double* generator);

}  // namespace wgan
}  // namespace tb
