// Schema and cost description of the a3c family (model/a3c.cc). One step, with N = actors and
// T = batch (t_max):
//   act    N (T + 1) forward passes on one stacked frame each: T to choose the actions, one
//          for the bootstrap value (no gradient)
//   train  the training forward and backward of N rollouts of T frames (the first
//          convolution's input, the frames, takes no gradient)
// and N updates of the shared weights per step (ModelCost::optimizer_updates). The actors'
// local copies of the weights and gradients (2 x N x params) are not in the memory
// estimate's categories. The game's own work (rendering, preprocessing) is not FLOPs.
#include "cost/atari.h"
#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

std::vector<LayerCost> network(double batch, int64_t actions, int64_t eb) {
  std::vector<LayerCost> ls;
  auto keep = [&] { ls.back().saved_bytes += ls.back().output_bytes; };
  const int64_t b = int64_t(batch);
  const cost::ConvGeometry c1{b, atari::kStack, atari::kSide, atari::kSide, 16, 8, 8, 4, 4, 0, 0,
                              1, true};
  ls.push_back(cost::conv("conv1", c1, eb, false));
  ls.push_back(cost::relu("relu1", double(b) * 16 * c1.out_h() * c1.out_w(), eb));
  keep();
  const cost::ConvGeometry c2{b, 16, c1.out_h(), c1.out_w(), 32, 4, 4, 2, 2, 0, 0, 1, true};
  ls.push_back(cost::conv("conv2", c2, eb, true));
  ls.push_back(cost::relu("relu2", double(b) * 32 * c2.out_h() * c2.out_w(), eb));
  keep();
  ls.push_back(cost::linear("fc", batch, 32 * c2.out_h() * c2.out_w(), 256, eb, true));
  ls.push_back(cost::relu("relu3", batch * 256, eb));
  keep();
  ls.push_back(cost::linear("policy", batch, 256, actions, eb, true));
  ls.push_back(cost::linear("value", batch, 256, 1, eb, true));
  // log-softmax, the chosen action's log-probability and the entropy
  ls.push_back(cost::softmax_xent("loss", batch, actions, eb));
  return ls;
}

ModelCost a3c_cost(const Config& cfg, int64_t eb) {
  const int64_t N = cfg.get_int("actors"), T = cfg.get_int("batch");
  const int64_t A = atari::kActions;
  ModelCost m;
  // Acting runs one frame at a time, so every forward pass reads all the weights again.
  const double acts = double(N * (T + 1));
  double input = double(atari::kStack) * atari::kSide * atari::kSide * eb, features = 0;
  for (auto l : network(1, A, eb)) {
    if (l.op == "softmax_xent") continue;     // acting samples from a softmax: not the loss
    if (l.name == "value") input = features;  // both heads read the fc features
    const double out = l.output_bytes;
    l.name = "act." + l.name;
    l.fwd_flops *= acts, l.fwd_matmul_flops *= acts;
    l.bytes_read = acts * (l.params * eb + input);
    l.bytes_written = acts * out;
    l.params = 0;
    l.bwd_input_flops = l.bwd_weight_flops = 0;
    l.saved_bytes = 0;
    l.output_bytes = out;
    if (l.name == "act.relu3") features = out;
    input = out;
    m.layers.push_back(std::move(l));
  }
  for (auto l : network(double(N * T), A, eb)) {
    l.name = "train." + l.name;
    m.layers.push_back(std::move(l));
  }
  // the rollouts' frames, actions and returns
  m.input_bytes = double(N * T) * (atari::kStack * atari::kSide * atari::kSide * eb + 8 + eb);
  m.optimizer_updates = double(N);
  m.optimizer_state_per_param = 1;  // the shared RMSprop's square averages, no momentum
  return m;
}

FamilySchema a3c_schema() {
  FamilySchema s{
      "a3c",
      "A3C (Mnih et al. 2016): the Atari actor-critic network on 4x84x84 frames of a rendered "
      "Pong-like game, `actors` threads updating shared weights with a shared RMSprop",
      {{"actors",
        "asynchronous actor threads, each with its own game and network copy",
        "2",
        1,
        256,
        {}}},
      "a3c:actors=2,batch=5,dtype=fp32"};
  s.task = "reinforcement learning";
  s.throughput_unit = "frames";
  s.batch_sweep = {5, 10, 20, 40};
  for (auto p : common_params(5, "rmsprop")) {
    if (p.name == "batch") {
      p.help = "t_max: agent steps each actor rolls out per update (the update's batch)";
      p.max = 100000;
    }
    if (p.name == "dtype") p.choices = {"fp32"};
    // The workload's own shared RMSprop (lr 7e-4, decay 0.99, eps 0.1, no momentum).
    if (p.name == "optimizer") p.choices = {"rmsprop"};
    if (p.name == "threads")
      p.help = "intra-op threads, shared out among the actors (0 = all cores)";
    // The data-parallel runner trains loss() with one optimizer; the actors are A3C's own
    // parallelism.
    if (p.name == "workers") {
      p.max = 1;
      p.help = "1 only: A3C's parallelism is its actors, not data-parallel workers";
    }
    s.params.push_back(p);
  }
  s.contract = "a3c:actors=1,batch=3";
  s.exemptions["forward_flops"] =
      "its step is the actors' rollouts and updates, not one loss(): the cost model's forward "
      "covers every actor step of an update; tests/gan_rl_models_test.cc checks the training "
      "forward against the profiler";
  return s;
}

const bool registered =
    (register_family_schema(a3c_schema()), register_cost("a3c", a3c_cost), true);

}  // namespace
}  // namespace tb
