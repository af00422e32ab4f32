#include "emulation/emulate.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "base/errors.h"
#include "emulation/family_training.h"
#include "emulation/fashion_mnist.h"
#include "emulation/fused_update.h"
#include "emulation/hadamard.h"
#include "emulation/language_training.h"
#include "emulation/to_target.h"
#include "numerics/policy.h"

namespace tb::emu {
namespace {

// --- Matrix multiply on the custom unit, differentiable -------------------------------------

torch::Tensor mad_mm(const Policy& p, const torch::Tensor& a, const torch::Tensor& b) {
  const auto A = a.contiguous(), B = b.contiguous();
  auto C = torch::empty({A.size(0), B.size(1)});
  if (p.ext_unit) {
    // Rows of C in parallel; the extension's functions must be thread-safe (pure).
    const int64_t K = A.size(1), N = B.size(1);
    at::parallel_for(0, A.size(0), 1, [&](int64_t r0, int64_t r1) {
      p.ext_unit->matmul(A.data_ptr<float>() + r0 * K, B.data_ptr<float>(),
                         C.data_ptr<float>() + r0 * N, r1 - r0, N, K);
    });
    return C;
  }
  num::mad_matmul(*p.mad, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), A.size(0),
                  B.size(1), A.size(1), at::get_num_threads());
  return C;
}

// y = x W^T + b with all three GEMMs (forward, input gradient, weight gradient) on the unit.
struct MadLinear : public torch::autograd::Function<MadLinear> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               torch::Tensor w, torch::Tensor b, const Policy* u) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["u"] = reinterpret_cast<int64_t>(u);
    ctx->saved_data["bias"] = b.numel() > 0;
    const auto y = mad_mm(*u, x, w.t());
    return b.numel() > 0 ? y + b : y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto s = ctx->get_saved_variables();
    const auto* u = reinterpret_cast<const Policy*>(ctx->saved_data["u"].toInt());
    const auto dy = g[0].contiguous();
    const torch::Tensor db = ctx->saved_data["bias"].toBool() ? dy.sum(0) : torch::Tensor();
    if (torch::GradMode::is_enabled()) {
      // Differentiated again (create_graph): the same products as unit ops themselves.
      const auto none = torch::empty({0}, dy.options());
      return {MadLinear::apply(dy, s[1].t(), none, u), MadLinear::apply(dy.t(), s[0].t(), none, u),
              db, torch::Tensor()};
    }
    return {mad_mm(*u, dy, s[1]), mad_mm(*u, dy.t(), s[0]), db, torch::Tensor()};
  }
};

// autograd Functions take no undefined inputs: a layer without bias passes an empty one.
torch::Tensor no_bias_as_empty(const torch::Tensor& b, const torch::Tensor& x) {
  return b.defined() ? b : torch::empty({0}, x.options());
}

}  // namespace

torch::Tensor unit_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          const Policy& p) {
  if (!p.has_unit()) return torch::nn::functional::linear(x, w, b);
  if (x.dim() == 2) return MadLinear::apply(x, w, no_bias_as_empty(b, x), &p);
  // Leading dimensions are rows, as nn::Linear treats them.
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(w.size(0));
  return MadLinear::apply(x.reshape({-1, x.size(-1)}), w, no_bias_as_empty(b, x), &p)
      .reshape(shape);
}

torch::Tensor unit_matmul(const torch::Tensor& a, const torch::Tensor& b, const Policy& p) {
  if (!p.has_unit()) return torch::matmul(a, b);
  if (b.dim() == 2) return unit_linear(a, b.t(), {}, p);
  const auto empty = torch::empty({0}, a.options());
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(b.size(-1));
  if (a.dim() != b.dim() || a.sizes().slice(0, a.dim() - 2) != b.sizes().slice(0, b.dim() - 2))
    throw Unsupported(p.str() + ": the unit multiplies batches of equal shape only");
  const auto A = a.reshape({-1, a.size(-2), a.size(-1)});
  const auto B = b.reshape({-1, b.size(-2), b.size(-1)});
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < A.size(0); ++i)
    out.push_back(MadLinear::apply(A[i], B[i].t(), empty, &p));
  return torch::stack(out).reshape(shape);
}

// On the unit: unfold (im2col) and a matrix multiply, so the convolution runs on it too. A
// grouped (depthwise) convolution is one such product per group.
torch::Tensor unit_conv2d(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          const ConvOptions& s, const Policy& p) {
  if (!p.has_unit())
    return torch::conv2d(x, w, b, {s.stride[0], s.stride[1]}, {s.pad[0], s.pad[1]},
                         {s.dilation[0], s.dilation[1]}, s.groups);
  if (s.groups > 1) {
    const auto xs = x.chunk(s.groups, 1), ws = w.chunk(s.groups, 0);
    const auto bs = b.defined() ? b.chunk(s.groups, 0) : std::vector<torch::Tensor>(s.groups);
    ConvOptions one = s;
    one.groups = 1;
    std::vector<torch::Tensor> ys;
    for (int64_t g = 0; g < s.groups; ++g) ys.push_back(unit_conv2d(xs[g], ws[g], bs[g], one, p));
    return torch::cat(ys, 1);
  }
  const int64_t n = x.size(0), h = x.size(2), wd = x.size(3), oc = w.size(0);
  const int64_t kh = w.size(2), kw = w.size(3);
  const auto cols = torch::nn::functional::unfold(
      x, torch::nn::functional::UnfoldFuncOptions({kh, kw})
             .padding({s.pad[0], s.pad[1]})
             .stride({s.stride[0], s.stride[1]})
             .dilation({s.dilation[0], s.dilation[1]}));  // [n, c*kh*kw, L]
  const int64_t L = cols.size(2);
  const auto rows = cols.transpose(1, 2).reshape({n * L, cols.size(1)});
  const auto y = MadLinear::apply(rows, w.reshape({oc, -1}), no_bias_as_empty(b, x), &p);
  const int64_t oh = (h + 2 * s.pad[0] - s.dilation[0] * (kh - 1) - 1) / s.stride[0] + 1;
  const int64_t ow = (wd + 2 * s.pad[1] - s.dilation[1] * (kw - 1) - 1) / s.stride[1] + 1;
  return y.reshape({n, L, oc}).transpose(1, 2).reshape({n, oc, oh, ow});
}

namespace {

// --- Approximate activations ------------------------------------------------------------------

struct Pwl {
  double lo, hi;
  std::vector<float> knots;  // function values at lo + i * h
  double h() const { return (hi - lo) / double(knots.size() - 1); }
};

const Pwl& pwl(const std::string& name) {
  static const Pwl tanh_pwl = [] {
    Pwl p{-4, 4, {}};
    for (int i = 0; i <= 32; ++i) p.knots.push_back(float(std::tanh(-4 + i * 0.25)));
    return p;
  }();
  static const Pwl sigmoid_pwl = [] {
    Pwl p{-8, 8, {}};
    for (int i = 0; i <= 32; ++i) p.knots.push_back(float(1 / (1 + std::exp(8 - i * 0.5))));
    return p;
  }();
  return name == "tanh-pwl" ? tanh_pwl : sigmoid_pwl;
}

struct PwlFunction : public torch::autograd::Function<PwlFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               const Pwl* f) {
    const auto knots = torch::tensor(f->knots);
    const int64_t segs = int64_t(f->knots.size()) - 1;
    const auto slopes = (knots.slice(0, 1) - knots.slice(0, 0, segs)) / f->h();
    const auto t = (x.clamp(f->lo, f->hi) - f->lo) / f->h();
    const auto idx = t.floor().clamp(0, segs - 1).to(torch::kLong);
    const auto y = knots.index({idx}) + (t - idx.to(torch::kFloat)) * f->h() * slopes.index({idx});
    // The gradient is the segment's slope inside the table and 0 where the output is flat.
    const auto inside = (x >= f->lo) & (x <= f->hi);
    ctx->save_for_backward({slopes.index({idx}) * inside.to(torch::kFloat)});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    return {g[0] * ctx->get_saved_variables()[0], torch::Tensor()};
  }
};

// An extension's activation, with its derivative as the gradient.
struct ExtActivation : public torch::autograd::Function<ExtActivation> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               const num::Extension* e) {
    const auto in = x.contiguous();
    auto y = torch::empty_like(in), d = torch::empty_like(in);
    e->activation(in.data_ptr<float>(), y.data_ptr<float>(), size_t(in.numel()));
    e->activation_grad(in.data_ptr<float>(), d.data_ptr<float>(), size_t(in.numel()));
    ctx->save_for_backward({d});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    return {g[0] * ctx->get_saved_variables()[0], torch::Tensor()};
  }
};

}  // namespace

torch::Tensor emulated_activation(const torch::Tensor& x, const Policy& p) {
  if (p.ext_activation) return ExtActivation::apply(x, p.ext_activation.get());
  const std::string& name = p.activation;
  if (name == "relu") return torch::relu(x);
  if (name == "tanh") return torch::tanh(x);
  if (name == "sigmoid") return torch::sigmoid(x);
  return approx_activation(x, name);
}

namespace {

// --- Models -------------------------------------------------------------------------------------

struct Net : torch::nn::Module {
  Net(const std::string& kind, const Policy& p) : kind(kind), policy(p) {
    auto param = [&](const std::string& n, std::vector<int64_t> shape, int64_t fan_in) {
      // Kaiming-uniform, as torch::nn::Linear and Conv2d initialise.
      const double bound = 1.0 / std::sqrt(double(fan_in));
      params.push_back(register_parameter(n, torch::empty(shape).uniform_(-bound, bound)));
    };
    if (kind == "mlp") {
      const int64_t sizes[] = {784, 256, 128, 10};
      for (int i = 0; i < 3; ++i) {
        param("w" + std::to_string(i), {sizes[i + 1], sizes[i]}, sizes[i]);
        param("b" + std::to_string(i), {sizes[i + 1]}, sizes[i]);
      }
    } else {
      param("c0", {8, 1, 5, 5}, 25);
      param("cb0", {8}, 25);
      param("c1", {16, 8, 5, 5}, 200);
      param("cb1", {16}, 200);
      param("w", {10, 16 * 7 * 7}, 16 * 7 * 7);
      param("b", {10}, 16 * 7 * 7);
    }
  }
  torch::Tensor q_act(const torch::Tensor& x) {
    return quantize_op(x, policy.activations, policy.errors);
  }
  // The weights point: the parameters pointed at rounded copies for a forward pass and its
  // backward (set_data, as the numerics= wrapper does), with no autograd node per parameter.
  // The gradient reaching a parameter is then the one with respect to its rounded value, as a
  // rounding op with an identity backward passed it on; weight gradients are rounded in the
  // step, in place. Each layer's bias before its weight: the order in which those ops drew from
  // the point's stochastic stream and took its delayed-scaling sites (GCC evaluated the layer
  // call's arguments right to left), so that a stored result reruns to the same bits.
  struct RoundedWeights {
    Net& net;
    std::vector<torch::Tensor> masters;
    explicit RoundedWeights(Net& n) : net(n) {
      // Masters kept in the weights' format are already what rounding would give.
      if (!net.policy.weights.enabled() ||
          (net.masters_in_format && leaves_unchanged(net.policy.weights, net.policy.master)))
        return;
      torch::NoGradGuard no_grad;
      for (const auto& p : net.params) masters.push_back(p.data());
      try {
        for (size_t i = 0; i < net.params.size(); i += 2)
          for (const size_t j : {i + 1, i})
            net.params[j].set_data(net.policy.weights.apply(masters[j]));
      } catch (...) {  // a malformed recipe: the masters back before the error leaves
        restore();
        throw;
      }
    }
    void restore() {
      for (size_t i = 0; i < masters.size(); ++i) net.params[i].set_data(masters[i]);
    }
    ~RoundedWeights() { restore(); }
    RoundedWeights(const RoundedWeights&) = delete;
    RoundedWeights& operator=(const RoundedWeights&) = delete;
  };
  // Linear layer i (params 2i, 2i + 1). With the random Hadamard transform it rounds its own
  // GEMM inputs, as Transformer Engine's Linear does (hadamard.h).
  torch::Tensor linear(const torch::Tensor& x, size_t i) {
    if (policy.rht_size > 0) return rht_linear(x, params[2 * i], params[2 * i + 1], policy, -1);
    return unit_linear(q_act(x), params[2 * i], params[2 * i + 1], policy);
  }
  torch::Tensor forward(torch::Tensor x) {
    if (kind == "mlp") {
      x = x.reshape({x.size(0), 784});
      for (size_t i = 0; i < 3; ++i) {
        x = linear(x, i);
        if (i < 2) x = emulated_activation(x, policy);
      }
      return q_act(x);
    }
    ConvOptions conv5x5;
    conv5x5.pad = {2, 2};
    for (size_t i = 0; i < 2; ++i) {
      x = unit_conv2d(q_act(x), params[2 * i], params[2 * i + 1], conv5x5, policy);
      x = torch::max_pool2d(emulated_activation(x, policy), 2);
    }
    x = x.reshape({x.size(0), -1});
    return q_act(linear(x, 2));
  }
  std::string kind;
  const Policy& policy;
  std::vector<torch::Tensor> params;
  bool masters_in_format = false;  // set once a step has rounded the masters
};

struct LossScale : num::LossScale {
  int64_t good = 0;  // steps since the last overflow or growth
};

SeedRun train_one(const EmulationOptions& o, const Policy& given, const Dataset& train,
                  const Dataset& test, uint64_t seed, const Progress& progress) {
  torch::manual_seed(seed);
  Policy policy = given;
  policy.reseed(seed);
  Net net(o.model, policy);
  std::vector<torch::Tensor> velocity;
  for (const auto& p : net.params) velocity.push_back(torch::zeros_like(p));
  LossScale ls{num::parse_loss_scale(policy.loss_scale)};
  int64_t skipped = 0;
  Learner learner;
  learner.step = [&](const torch::Tensor& images, const torch::Tensor& labels) {
    policy.begin_step();
    for (auto& p : net.params) p.mutable_grad() = torch::Tensor();
    {
      const Net::RoundedWeights rounded(net);
      const auto loss = torch::nn::functional::cross_entropy(net.forward(images), labels);
      (loss * ls.scale).backward();
    }
    bool finite = true;  // only dynamic loss scaling acts on overflow
    for (auto& p : net.params)
      if (p.grad().defined())
        finite =
            policy.weight_grads.round_unscale_(p.mutable_grad(), ls.scale, ls.dynamic) && finite;
    if (ls.dynamic && !finite) {  // skip the step, halve the scale
      ls.scale /= 2;
      ls.good = 0;
      ++skipped;
      return;
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < net.params.size(); ++i) {
      momentum_step(MomentumRule::kRoundStateFirst, net.params[i], velocity[i],
                    net.params[i].grad(), o.momentum, o.lr, policy.optimizer_state, policy.master);
    }
    net.masters_in_format = policy.master.enabled();
    if (ls.dynamic && ++ls.good == 2000) {
      ls.scale *= 2;
      ls.good = 0;
    }
  };
  learner.logits = [&](const torch::Tensor& images) {
    policy.set_recording(false);  // evaluation uses the scales, records no amax
    const Net::RoundedWeights rounded(net);
    const auto out = net.forward(images);
    policy.set_recording(true);
    return out;
  };
  learner.scaling = [&](int64_t iteration) { return policy.take_scaling(iteration); };
  learner.count = [&](bool on) { policy.set_counting(on); };
  learner.skipped_steps = [&] { return skipped; };
  learner.loss_scale = [&] { return ls.scale; };
  return train_to_target(o, train, test, seed, learner, progress);
}

}  // namespace

torch::Tensor approx_activation(const torch::Tensor& x, const std::string& name) {
  if (name != "tanh-pwl" && name != "sigmoid-pwl")
    throw UsageError("activation '" + name +
                     "' (expected relu, tanh, sigmoid, tanh-pwl or sigmoid-pwl)");
  return PwlFunction::apply(x, &pwl(name));
}

void Policy::set_unit(const std::string& text) {
  mad.reset();
  ext_unit.reset();
  if (text.empty() || text == "off") return;
  if (text.rfind("ext:", 0) == 0) {
    ext_unit = num::Extension::load(text.substr(4));
    return;
  }
  mad = num::parse_mad(text);
}

void Policy::set_activation(const std::string& text) {
  activation = text;
  ext_activation.reset();
  if (text.rfind("ext:", 0) == 0) {
    ext_activation = num::Extension::load(text.substr(4));
    if (!ext_activation->has_activation())
      throw UsageError("extension '" + text.substr(4) +
                       "' has no tb_activation/tb_activation_grad");
    return;
  }
  if (text != "relu" && text != "tanh" && text != "sigmoid")
    approx_activation(torch::zeros({1}), text);  // validates the name
}

void Policy::reseed(uint64_t run_seed) {
  uint64_t stream = run_seed * 16;
  for (QuantPoint* q : globals()) q->reseed(stream++);
  for (auto& [layer, points] : layers)
    for (auto& q : points)
      // A stream apart from every run's global ones.
      if (q)
        q->reseed(0xD1B54A32D192ED03ull * (run_seed + 1) + uint64_t(layer) * 6 +
                  uint64_t(&q - points.data()));
}

namespace {

// Every point with its name in results: KEY, or KEY.N for a layer's own.
template <typename F>
void each_point(const Policy& p, F&& f) {
  static const char* kKeys[] = {"w", "a", "e", "g", "o", "m"};
  const auto globals = p.globals();
  for (size_t i = 0; i < globals.size(); ++i) f(std::string(kKeys[i]), *globals[i]);
  for (const auto& [layer, points] : p.layers)
    for (size_t i = 0; i < points.size(); ++i)
      if (points[i]) f(std::string(kKeys[i]) + "." + std::to_string(layer), *points[i]);
}

}  // namespace

void Policy::begin_step() const {
  each_point(*this, [](const std::string&, const QuantPoint& q) {
    if (q.enabled()) q.begin_step();
  });
}

void Policy::set_counting(bool on) const {
  each_point(*this, [on](const std::string&, const QuantPoint& q) {
    if (q.enabled()) q.set_counting(on);
  });
}

void Policy::set_recording(bool on) const {
  each_point(*this, [on](const std::string&, const QuantPoint& q) {
    if (q.enabled()) q.set_recording(on);
  });
}

std::vector<ScalingSample> Policy::take_scaling(int64_t iteration) const {
  std::vector<ScalingSample> out;
  each_point(*this, [&](const std::string& name, const QuantPoint& q) {
    if (!q.enabled()) return;
    const QuantPoint::Stats st = q.take_stats();
    if (st.empty()) return;
    ScalingSample s;
    s.point = name;
    s.iteration = iteration;
    s.amax = st.amax;
    s.scale_min = st.scale_min;
    s.scale_max = st.scale_max;
    s.sites = st.sites;
    s.values = st.counts.values;
    s.overflow = st.counts.overflow;
    s.underflow = st.counts.underflow;
    s.nonfinite = st.counts.nonfinite;
    s.overflow_counted = st.overflow_counted;
    out.push_back(s);
  });
  return out;
}

std::vector<uint64_t> Policy::stream_positions() const {
  std::vector<uint64_t> out;
  for (const QuantPoint* q : globals()) out.push_back(q->position());
  for (const auto& [layer, points] : layers)
    for (const auto& q : points)
      if (q) out.push_back(q->position());
  return out;
}

void Policy::seek_streams(const std::vector<uint64_t>& positions) const {
  size_t i = 0;
  auto next = [&](const QuantPoint& q) {
    if (i < positions.size()) q.seek(positions[i++]);
  };
  for (const QuantPoint* q : globals()) next(*q);
  for (const auto& [layer, points] : layers)
    for (const auto& q : points)
      if (q) next(*q);
}

const QuantPoint& Policy::at(int place, int layer) const {
  if (layer >= 0) {
    const auto it = layers.find(layer);
    if (it != layers.end() && it->second[size_t(place)]) return *it->second[size_t(place)];
  }
  return *globals()[size_t(place)];
}

std::string Policy::str() const {
  std::string s = "weights=" + weights.str() + " activations=" + activations.str() +
                  " errors=" + errors.str() + " weight-grads=" + weight_grads.str() +
                  " optimizer-state=" + optimizer_state.str() + " master=" + master.str() +
                  " loss-scale=" + loss_scale + " activation=" + activation;
  const char* keys[] = {"weights",      "activations",     "errors",
                        "weight-grads", "optimizer-state", "master"};
  for (const auto& [layer, points] : layers)
    for (size_t i = 0; i < points.size(); ++i)
      if (points[i])
        s += " " + std::string(keys[i]) + "." + std::to_string(layer) + "=" + points[i]->str();
  if (rht_size) s += " rht=" + std::to_string(rht_size) + ":" + std::to_string(rht_seed);
  if (mad) s += " unit=" + mad->str();
  if (ext_unit) s += " unit=ext:" + ext_unit->path();
  return s;
}

EmulationResult emulate(const EmulationOptions& given, const Policy& p, const Progress& progress) {
  EmulationOptions o = given;
  const bool text = is_text_corpus(o.dataset);
  if (!text && o.dataset != "fashion-mnist")
    throw UsageError("dataset '" + o.dataset + "' (expected fashion-mnist or gcide)");
  const bool family = is_family_model(o.model);
  if (p.rht_size > 0 && p.has_unit())
    throw UsageError("rht:" + std::to_string(p.rht_size) +
                     " and a unit both replace the Linear layers' GEMMs; choose one");
  if (!family && !p.layers.empty())
    throw UsageError(
        "per-layer points apply to family models (--model fc:..., cnn:... or gpt:...), not "
        "to the built-in " +
        o.model);
  if (o.batch < 1 || o.batch > 60000)
    throw UsageError("batch " + std::to_string(o.batch) + " (1..60000)");
  if (text) {
    o.model = language_model_config(o.model, o.batch).str();
    if (o.target_loss == 0 && o.model == language_model_config(kLanguageModel, o.batch).str())
      o.target_loss = kLanguageTargetLoss;
    if (o.target_loss == 0)
      throw UsageError("model " + o.model +
                       ": the language task needs --target-loss (a default is known for " +
                       kLanguageModel + " only)");
    if (o.lr == 0) o.lr = kLanguageLr;
    if (o.eval_examples == 0) o.eval_examples = kLanguageEvalWindows;
  } else {
    if (o.target_loss != 0)
      throw UsageError(
          fmt::format("target-loss {}: a loss target is the language task's (--dataset gcide); "
                      "Fashion-MNIST's target is a test accuracy (--target)",
                      o.target_loss));
    if (family) {
      o.model = fashion_mnist_family_config(o.model, o.batch).str();
    } else if (o.model != "mlp" && o.model != "cnn") {
      throw UsageError("model '" + o.model + "' (expected mlp, cnn, or an fc or cnn config)");
    }
    if (o.lr == 0) o.lr = 0.05;
    if (o.eval_examples == 0) o.eval_examples = 10000;
    if (o.eval_examples < 1 || o.eval_examples > 10000)
      throw UsageError("eval-examples " + std::to_string(o.eval_examples) + " (1..10000)");
    if (!(o.target > 0 && o.target <= 1))
      throw UsageError(fmt::format("target {} (a test accuracy in (0, 1])", o.target));
  }
  if (text && !(o.target_loss > 0 && std::isfinite(o.target_loss)))
    throw UsageError(
        fmt::format("target-loss {} (a validation loss in nats per byte, > 0)", o.target_loss));
  if (text && (o.eval_examples < 1 || o.eval_examples > 100000))
    throw UsageError("eval-examples " + std::to_string(o.eval_examples) +
                     " (held-out windows, 1..100000)");
  if (o.eval_every < 1)
    throw UsageError("eval-every " + std::to_string(o.eval_every) + " (at least 1)");
  if (o.max_iters < 1)
    throw UsageError("max-iters " + std::to_string(o.max_iters) + " (at least 1)");
  if (o.count_every < 0)
    throw UsageError("count-every " + std::to_string(o.count_every) +
                     " (0: the step before each evaluation, or every N steps)");
  if (o.seeds < 1 || o.seeds > 1000)
    throw UsageError("seeds " + std::to_string(o.seeds) + " (1..1000)");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw UsageError(fmt::format("lr {} (a finite learning rate above 0)", o.lr));
  if (o.threads < 0)
    throw UsageError("threads " + std::to_string(o.threads) + " (0: every core, or a count)");
  num::parse_loss_scale(p.loss_scale);
  EmulationResult r;
  r.options = o;
  r.policy = p.str();
  if (text) {
    const TextCorpus corpus = load_text_corpus(o.dataset);
    for (int s = 0; s < o.seeds; ++s)
      r.runs.push_back(train_language(o, p, corpus, o.first_seed + uint64_t(s), progress));
  } else {
    const Dataset train = load_fashion_mnist("train"), test = load_fashion_mnist("test");
    for (int s = 0; s < o.seeds; ++s)
      r.runs.push_back(family
                           ? train_family(o, p, train, test, o.first_seed + uint64_t(s), progress)
                           : train_one(o, p, train, test, o.first_seed + uint64_t(s), progress));
  }
  r.summary = summarize_seeds(r.runs);
  return r;
}

}  // namespace tb::emu
