// Schema and cost description of the wgan_gp family (model/wgan_gp.cc). One step, with n =
// critic_iters and B = batch:
//   sample     n x generator forward on B noise vectors (no gradient)
//   critic     n x critic forward + backward on the 2B real and generated images
//   penalty    n x the gradient penalty on B interpolates: in the forward phase, the
//              critic's forward and its input gradient (autograd::grad, create_graph);
//              in the backward phase, the double backward, counted as twice a first
//              backward of the critic (the gradient's graph is differentiated with
//              respect to its inputs and weights, and so is the forward graph again)
//   generator  1 x generator forward + backward on B noise vectors
//   critic_g   1 x critic forward + input gradient for the generator's loss (the critic's
//              weights take no gradient then)
// Each pass's layers are listed once, with their FLOPs and bytes times the pass's count.
// Parameters are counted in the critic and generator passes; feature maps in the phase
// that keeps more alive (the critic update: 2B images' graph plus the penalty's two graphs).
#include <fmt/format.h>

#include <algorithm>

#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

struct Net {
  std::vector<LayerCost> layers;
  int64_t eb, batch;
  void keep() { layers.back().saved_bytes += layers.back().output_bytes; }
  void conv(const std::string& name, int64_t cin, int64_t hw, int64_t cout, int64_t k, bool bias,
            bool input_grad = true) {
    layers.push_back(cost::conv(name, {batch, cin, hw, hw, cout, k, k, 1, 1, k / 2, k / 2, 1, bias},
                                eb, input_grad));
  }
  void relu(const std::string& name, int64_t c, int64_t hw) {
    layers.push_back(cost::relu(name, double(batch) * c * hw * hw, eb));
    keep();
  }
  void add(const std::string& name, int64_t c, int64_t hw) {
    layers.push_back(cost::add(name, double(batch) * c * hw * hw, eb));
    keep();  // the next normalization's input
  }
};

std::vector<LayerCost> generator(int64_t batch, int64_t dim, int64_t eb) {
  Net n{{}, eb, batch};
  n.layers.push_back(cost::linear("input", batch, 128, 16 * 8 * dim, eb, false));
  n.keep();
  const int64_t widths[] = {8 * dim, 8 * dim, 4 * dim, 2 * dim, dim};
  int64_t hw = 4;
  for (int i = 0; i < 4; ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    const std::string p = fmt::format("blocks.{}.", i);
    n.layers.push_back(cost::batchnorm(p + "bn1", batch, in, hw * hw, eb));
    n.relu(p + "relu1", in, hw);
    n.layers.push_back(cost::upsample2(p + "up1", batch, in, hw, hw, eb));
    n.keep();
    n.conv(p + "conv1", in, 2 * hw, out, 3, false);
    n.keep();
    n.layers.push_back(cost::batchnorm(p + "bn2", batch, out, 4 * hw * hw, eb));
    n.relu(p + "relu2", out, 2 * hw);
    n.conv(p + "conv2", out, 2 * hw, out, 3, true);
    n.layers.push_back(cost::upsample2(p + "shortcut.up", batch, in, hw, hw, eb));
    n.keep();
    n.conv(p + "shortcut", in, 2 * hw, out, 1, true);
    hw *= 2;
    n.add(p + "add", out, hw);
  }
  n.layers.push_back(cost::batchnorm("bn", batch, dim, hw * hw, eb));
  n.relu("relu", dim, hw);
  n.conv("output", dim, hw, 3, 3, true);
  n.layers.push_back(cost::elementwise("tanh", "tanh", double(batch) * 3 * hw * hw, 1, 3, 1, eb));
  return n.layers;
}

std::vector<LayerCost> critic(int64_t batch, int64_t dim, int64_t eb, bool image_grad) {
  Net n{{}, eb, batch};
  n.conv("input", 3, 64, dim, 3, true, image_grad);
  n.keep();
  const int64_t widths[] = {dim, 2 * dim, 4 * dim, 8 * dim, 8 * dim};
  int64_t hw = 64;
  for (int i = 0; i < 4; ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    const std::string p = fmt::format("blocks.{}.", i);
    n.layers.push_back(cost::layernorm(p + "ln1", batch, in, hw * hw, eb));
    n.relu(p + "relu1", in, hw);
    n.conv(p + "conv1", in, hw, in, 3, false);
    n.keep();
    n.layers.push_back(cost::layernorm(p + "ln2", batch, in, hw * hw, eb));
    n.relu(p + "relu2", in, hw);
    n.conv(p + "conv2", in, hw, out, 3, true);
    n.layers.push_back(cost::vision::avgpool(p + "pool", batch, out, hw * hw, hw * hw / 4, 2, eb));
    n.layers.push_back(
        cost::vision::avgpool(p + "shortcut.pool", batch, in, hw * hw, hw * hw / 4, 2, eb));
    n.keep();
    n.conv(p + "shortcut", in, hw / 2, out, 1, true);
    hw /= 2;
    n.add(p + "add", out, hw);
  }
  n.layers.push_back(cost::linear("output", batch, 16 * 8 * dim, 1, eb, true));
  return n.layers;
}

bool is_matmul(const LayerCost& l) { return l.op == "conv2d" || l.op == "linear"; }

struct Pass {
  std::string prefix;
  double count;
  bool weight_grad, backward, count_params;
};

void append(ModelCost& m, std::vector<LayerCost> layers, const Pass& p, double saved_factor) {
  for (auto& l : layers) {
    l.name = p.prefix + "." + l.name;
    if (!p.count_params) l.params = 0;
    if (!p.weight_grad) l.bwd_weight_flops = 0;
    if (!p.backward) l.bwd_input_flops = l.bwd_weight_flops = 0;
    l.saved_bytes *= saved_factor;
    l.fwd_flops *= p.count, l.fwd_matmul_flops *= p.count;
    l.bwd_input_flops *= p.count, l.bwd_weight_flops *= p.count;
    l.bytes_read *= p.count, l.bytes_written *= p.count, l.gpu_pass_bytes *= p.count;
    m.layers.push_back(std::move(l));
  }
}

ModelCost wgan_gp_cost(const Config& cfg, int64_t eb) {
  const int64_t B = cfg.get_int("batch"), dim = cfg.get_int("dim");
  const double n = double(cfg.get_int("critic_iters"));
  const bool penalty = cfg.get_int("lambda") != 0;
  auto saved = [](const std::vector<LayerCost>& ls) {
    double s = 0;
    for (const auto& l : ls) s += l.saved_bytes;
    return s;
  };
  const auto critic_b = critic(B, dim, eb, true);
  // Alive at once: the critic update's graphs, or the generator update's.
  const double critic_step = 2 * saved(critic_b) + (penalty ? 2 * saved(critic_b) : 0);
  const double generator_step = saved(generator(B, dim, eb)) + saved(critic_b);
  const bool critic_peak = critic_step >= generator_step;

  ModelCost m;
  append(m, generator(B, dim, eb), {"sample", n, false, false, false}, 0);
  append(m, critic(2 * B, dim, eb, false), {"critic", n, true, true, true}, critic_peak);
  if (penalty) {
    std::vector<LayerCost> gp = critic_b;
    for (auto& l : gp) {
      // autograd::grad's input gradient runs in the forward phase; the double backward
      // costs twice a first-order backward.
      l.fwd_flops += l.bwd_input_flops;
      if (is_matmul(l)) l.fwd_matmul_flops += l.bwd_input_flops;
      l.bwd_input_flops *= 2, l.bwd_weight_flops *= 2;
      l.bytes_read *= 2, l.bytes_written *= 2, l.gpu_pass_bytes *= 2;
    }
    append(m, gp, {"penalty", n, true, true, false}, critic_peak ? 2 : 0);
  }
  append(m, generator(B, dim, eb), {"generator", 1, true, true, true}, !critic_peak);
  append(m, critic_b, {"critic_g", 1, false, true, false}, !critic_peak);
  // Real images for every critic iteration.
  m.input_bytes = n * B * 3 * 64 * 64 * eb;
  int64_t critic_params = 0, generator_params = 0;
  for (const auto& l : m.layers) {
    if (l.name.rfind("critic.", 0) == 0) critic_params += l.params;
    if (l.name.rfind("generator.", 0) == 0) generator_params += l.params;
  }
  m.optimizer_updates =
      (n * critic_params + generator_params) / double(critic_params + generator_params);
  // The critic's gradients are freed before the generator's update, which takes none for the
  // critic's weights: the two sets are never alive together.
  m.gradient_params_at_once = std::max(critic_params, generator_params);
  return m;
}

FamilySchema wgan_schema() {
  FamilySchema s{
      "wgan_gp",
      "WGAN-GP (Gulrajani et al. 2017): residual generator and layer-norm critic for 64x64 "
      "images; critic_iters critic updates with gradient penalty, then one generator update",
      {{"dim", "width of the first critic / last generator block (paper: 64)", "64", 1, 4096, {}},
       {"critic_iters", "critic updates per generator update", "5", 1, 1000, {}},
       {"lambda", "gradient penalty weight (0 turns the penalty off)", "10", 0, 100000, {}}},
      "wgan_gp:dim=64,critic_iters=5,lambda=10,batch=64,dtype=fp32"};
  s.task = "image generation";
  s.throughput_unit = "images";
  s.batch_sweep = {8, 16, 32, 64};
  for (auto p : common_params(64, "adam")) {
    if (p.name == "batch") p.help = "real (and generated) images per critic iteration";
    if (p.name == "dtype") p.choices = {"fp32"};
    // Its optimizers are the workload's own (Adam, lr 1e-4, betas 0 and 0.9).
    if (p.name == "optimizer") p.choices = {"adam"};
    // The data-parallel runner trains loss() with one optimizer; this step is not that.
    if (p.name == "workers") {
      p.max = 1;
      p.help = "1 only: the critic/generator step has no data-parallel version";
    }
    s.params.push_back(p);
  }
  s.contract = "wgan_gp:dim=4,critic_iters=1,batch=2";
  s.exemptions["forward_flops"] =
      "its step is critic and generator updates, not one loss(): the cost model's forward covers "
      "all of them; tests/gan_rl_models_test.cc checks them against the profiler";
  return s;
}

const bool registered =
    (register_family_schema(wgan_schema()), register_cost("wgan_gp", wgan_gp_cost), true);

}  // namespace
}  // namespace tb
