// A user's TorchScript module (torch.jit.script/trace + save) trained as a family, so it
// runs, profiles, sweeps and round-trips like the generated ones (docs/suite.md). It has no
// cost description: its FLOPs are counted by the profiler (runner/profile.h). Its layer
// operators are rewritten to pass the activation points (model/torchscript_points.h), so
// that `numerics=` reaches them as in the other families.
#include "cost/torchscript.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <torch/script.h>

#include "base/errors.h"
#include "model/torchscript_points.h"
#include "model/workload.h"

namespace tb {

namespace {

// The interesting line of a TorchScript interpreter error: its own first line is only
// "The following operation failed in the TorchScript interpreter."
std::string module_error(const std::exception& e) {
  // c10::Error's what() carries a C++ backtrace; the interpreter's JITException does not.
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  const std::string msg = c10 ? c10->what_without_backtrace() : e.what();
  std::string first;
  size_t start = 0;
  while (start < msg.size()) {
    const size_t nl = std::min(msg.find('\n', start), msg.size());
    const std::string line = msg.substr(start, nl - start);
    if (line.rfind("RuntimeError: ", 0) == 0) return line.substr(14);
    if (first.empty() && line.find_first_not_of(' ') != std::string::npos) first = line;
    start = nl + 1;
  }
  return first;
}

// nn::Module view of the scripted module's tensors: the same tensors (to() replaces
// their data in place), so the runner's optimizer, device moves and memory accounting
// work on it as on any family.
struct ScriptedImpl : torch::nn::Module {
  explicit ScriptedImpl(torch::jit::Module m) : jit(std::move(m)) {
    auto name_of = [&](std::string n) {
      for (auto& c : n)
        if (c == '.') c = '_';
      while (named_parameters(false).contains(n) || named_buffers(false).contains(n)) n += "_";
      return n;
    };
    for (const auto& p : jit.named_parameters(/*recurse=*/true))
      register_parameter(name_of(p.name), p.value, p.value.requires_grad());
    for (const auto& b : jit.named_buffers(/*recurse=*/true))
      register_buffer(name_of(b.name), b.value);
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    jit.train(on);
  }
  torch::jit::Module jit;
};

class TorchScriptWorkload : public Workload {
 public:
  explicit TorchScriptWorkload(const Config& c)
      : path_(c.get("path")),
        shapes_(parse_shapes(c.get("input"))),
        regression_(c.get("target") == "regression"),
        batch_(c.get_int("batch")) {
    struct stat st {};
    if (stat(path_.c_str(), &st) != 0)
      throw InvalidModel(fmt::format("torchscript: path={}: no such file", path_));
    if (!S_ISREG(st.st_mode))
      throw InvalidModel(fmt::format("torchscript: path={}: not a regular file", path_));
    torch::jit::Module m;
    try {
      m = torch::jit::load(path_);
    } catch (const std::exception& e) {
      throw InvalidModel(fmt::format("torchscript: path={}: not a TorchScript archive ({})", path_,
                                     module_error(e)));
    }
    if (!m.find_method("forward"))
      throw InvalidModel(fmt::format("torchscript: path={}: the module has no forward()", path_));
    // Before the first run: the graph executor optimizes (and inlines) what it first runs.
    outside_points_ = route_through_points(m);
    net_ = std::make_shared<ScriptedImpl>(std::move(m));
    int64_t trainable = 0;
    for (const auto& p : net_->parameters()) trainable += p.requires_grad() ? p.numel() : 0;
    if (trainable == 0)
      throw InvalidModel(
          fmt::format("torchscript: path={}: the module has no trainable parameters", path_));
  }

  torch::nn::Module& module() override { return *net_; }

  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    Batch b;
    for (const auto& s : shapes_) {
      std::vector<int64_t> dims = {batch_};
      dims.insert(dims.end(), s.begin(), s.end());
      b.inputs.push_back(torch::randn(dims, torch::TensorOptions().device(device)).to(dtype));
    }
    // The labels need the output's shape: one forward pass without gradients, which is
    // also where a module that rejects the input shapes says so.
    torch::Tensor out;
    {
      torch::NoGradGuard no_grad;
      out = forward(b, /*checking=*/true);
    }
    if (regression_) {
      b.target = torch::randn_like(out);
    } else {
      if (out.dim() < 2)
        throw InvalidModel(fmt::format(
            "torchscript: target=classes needs an output of at least 2 dimensions (batch, "
            "classes, ...); the module returns {}",
            shapes_text({out.sizes().vec()})));
      std::vector<int64_t> dims = out.sizes().vec();
      const int64_t classes = dims[1];
      dims.erase(dims.begin() + 1);
      b.target = torch::randint(0, classes, dims,
                                torch::TensorOptions().device(device).dtype(torch::kLong));
    }
    return b;
  }

  torch::Tensor loss(const Batch& b) override {
    const torch::Tensor out = activation_point(forward(b, /*checking=*/false));
    if (regression_) return torch::mse_loss(out, b.target);
    return torch::nn::functional::cross_entropy(out, b.target);
  }

  int64_t examples_per_step() const override { return batch_; }

  bool has_activation_points() const override { return outside_points_.empty(); }
  std::string activation_points_missing() const override {
    std::string ops;
    for (const auto& op : outside_points_) ops += (ops.empty() ? "" : ", ") + op;
    return fmt::format("path={}: operators left inside the TorchScript interpreter: {}", path_,
                       ops);
  }
  std::vector<std::vector<torch::Tensor>> layers() override { return script_layers(net_->jit); }

 private:
  // `checking`: the first pass, where an error means the module rejects the inputs; later
  // errors (out of memory, ...) keep their own status.
  torch::Tensor forward(const Batch& b, bool checking) {
    std::vector<torch::jit::IValue> in(b.inputs.begin(), b.inputs.end());
    torch::jit::IValue out;
    try {
      out = net_->jit.forward(in);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (what.find("can't allocate memory") != std::string::npos ||
          what.find("out of memory") != std::string::npos)
        throw;
      // Emulation's refusals (a projection LSTM, a broadcast product on the unit, ...) lose
      // their type inside the interpreter; their text says what they are.
      if (what.find("cannot run on the emulated") != std::string::npos ||
          what.find("cannot run through emulation") != std::string::npos ||
          what.find("the unit multiplies") != std::string::npos)
        throw Unsupported("torchscript: " + module_error(e));
      if (!checking) throw;
      throw InvalidModel(fmt::format("torchscript: the module rejects input={} (batch {}): {}",
                                     shapes_text(shapes_), batch_, module_error(e)));
    }
    // A tuple or list output (logits, aux...): the first tensor is trained.
    if (out.isTuple() && !out.toTupleRef().elements().empty()) out = out.toTupleRef().elements()[0];
    if (out.isList() && !out.toListRef().empty()) out = out.toListRef()[0];
    if (!out.isTensor())
      throw InvalidModel(fmt::format("torchscript: path={}: forward() returns {}, not a tensor",
                                     path_, out.tagKind()));
    return out.toTensor();
  }

  std::string path_;
  std::vector<std::vector<int64_t>> shapes_;
  bool regression_;
  int64_t batch_;
  std::shared_ptr<ScriptedImpl> net_;
  // Layer operators that no activation point reaches (route_through_points).
  std::vector<std::string> outside_points_;
};

const bool torchscript_registered =
    (register_builder("torchscript",
                      [](const Config& c) { return std::make_unique<TorchScriptWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
