// The `torchscript` family's schema. It has no cost description: a user's module is known only
// once LibTorch loads it, so its FLOPs are counted by the profiler (runner/profile.h).
#include "cost/torchscript.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/errors.h"
#include "spec/family.h"

namespace tb {

std::vector<std::vector<int64_t>> parse_shapes(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return UsageError(
        fmt::format("torchscript: input={}: {} (expected SHAPE[+SHAPE...], "
                    "SHAPE like 3x224x224, without the batch dimension)",
                    text, why));
  };
  std::vector<std::vector<int64_t>> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t plus = std::min(text.find('+', start), text.size());
    const std::string one = text.substr(start, plus - start);
    if (one.empty()) throw bad("empty shape");
    std::vector<int64_t> dims;
    size_t s = 0;
    while (s <= one.size()) {
      const size_t x = std::min(one.find('x', s), one.size());
      const std::string d = one.substr(s, x - s);
      if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string::npos)
        throw bad("'" + d + "' is not a dimension");
      const int64_t v = std::stoll(d);
      if (v < 1) throw bad("dimension " + d + " is not positive");
      dims.push_back(v);
      s = x + 1;
    }
    if (dims.size() > 8) throw bad("more than 8 dimensions");
    out.push_back(dims);
    start = plus + 1;
  }
  if (out.size() > 16) throw bad("more than 16 inputs");
  return out;
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string out;
  for (const auto& s : shapes) {
    if (!out.empty()) out += "+";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  }
  return out;
}

namespace {

FamilySchema torchscript_schema() {
  ParamSpec path{"path", "TorchScript archive (torch.jit.save) to train", ""};
  path.text = [](const std::string& v) { return v; };
  ParamSpec input{"input",
                  "input shapes without the batch dimension, '+' between inputs: 3x224x224, "
                  "16+3x8x8",
                  ""};
  input.text = [](const std::string& v) { return shapes_text(parse_shapes(v)); };
  FamilySchema s{
      "torchscript",
      "a user's TorchScript module: random float inputs of the given shapes, CE on random "
      "labels (classes = output dim 1) or MSE on a random target; FLOPs from the profiler",
      {path,
       input,
       {"target",
        "classes (cross-entropy) or regression (MSE)",
        "classes",
        0,
        0,
        {"classes", "regression"}}},
      "torchscript:path=model.pt,input=3x32x32,target=classes,batch=8"};
  for (auto& p : common_params(8, "sgd")) s.params.push_back(p);
  s.contract = "torchscript:path=model.pt,input=3x32x32,target=classes,batch=8";
  const std::string why =
      "the module is the user's TorchScript file, and it has no cost description (the profiler "
      "counts its FLOPs); tests/torchscript_test.cc makes modules and checks them";
  for (const char* clause : {"cost", "parameters", "forward_flops", "memory", "activation_points"})
    s.exemptions[clause] = why;
  return s;
}

const bool registered = (register_family_schema(torchscript_schema()), true);

}  // namespace
}  // namespace tb
