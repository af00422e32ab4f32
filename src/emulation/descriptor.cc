#include "emulation/descriptor.h"

#include "cost/fashion_mnist.h"
#include "emulation/family_training.h"
#include "emulation/language_training.h"

namespace tb {

std::string compute_format(const emu::Policy& p) {
  std::string widest, scaling;
  double bits = 0;
  bool any = false;
  // The points feeding the GEMMs: each place's global point; where that is off but layers set
  // their own (Transformer Engine's placement: `a.N` on the Linear layers' inputs, attention and
  // logits left alone), those layers' points.
  std::vector<const emu::QuantPoint*> points;
  for (int place = 0; place < 3; ++place) {
    const emu::QuantPoint* global = p.globals()[size_t(place)];
    std::vector<const emu::QuantPoint*> layered;
    for (const auto& [layer, own] : p.layers)
      if (own[size_t(place)] && own[size_t(place)]->enabled())
        layered.push_back(&*own[size_t(place)]);
    if (global->enabled() || layered.empty())
      points.push_back(global);
    else
      points.insert(points.end(), layered.begin(), layered.end());
  }
  for (const emu::QuantPoint* q : points) {
    double b = 32;
    std::string name = "fp32";
    if (q->enabled()) {
      any = true;
      if (q->str().rfind("ext:", 0) != 0) {
        b = q->format().bits_per_element();
        name = q->format().display_name();
      }
    }
    // A scaling recipe comes along (the widest point's, else the first one's): simulate
    // charges its passes.
    const std::string suffix = q->enabled() && !q->is_extension() && q->scaling().enabled()
                                   ? "@" + q->scaling().str()
                                   : "";
    if (b > bits) {
      bits = b, widest = name;
      if (!suffix.empty()) scaling = suffix;
    } else if (scaling.empty()) {
      scaling = suffix;
    }
  }
  if (!any && p.mad) return p.mad->product.display_name();
  // fp32 points under a narrower scaled one: the accelerator still runs fp32.
  return widest == "fp32" ? widest : widest + scaling;
}

nlohmann::json variant_descriptor(const emu::EmulationOptions& o, const emu::Policy& p) {
  nlohmann::json points = nlohmann::json::object();
  const std::pair<const char*, const emu::QuantPoint*> named[] = {
      {"weights", &p.weights},
      {"activations", &p.activations},
      {"errors", &p.errors},
      {"weight_grads", &p.weight_grads},
      {"optimizer_state", &p.optimizer_state},
      {"master", &p.master}};
  for (const auto& [name, q] : named) {
    if (!q->enabled()) {
      points[name] = {{"format", "off"}};
    } else if (q->str().rfind("ext:", 0) == 0) {
      points[name] = {{"format", q->str()}};
    } else {
      points[name] = {{"format", q->format().display_name()},
                      {"rounding", num::rounding_name(q->rounding())}};
      // Only where there is one: earlier descriptors keep their text (and identity).
      if (q->scaling().enabled()) points[name]["scaling"] = q->scaling().str();
    }
  }
  std::string unit;
  if (p.mad) unit = p.mad->str();
  if (p.ext_unit) unit = "ext:" + p.ext_unit->path();
  const bool text = emu::is_text_corpus(o.dataset);
  nlohmann::json d = {{"model", o.model},
                      {"batch", o.batch},
                      {"lr", o.lr},
                      {"momentum", o.momentum},
                      {"target", o.target},
                      {"eval_every", o.eval_every},
                      {"eval_examples", o.eval_examples},
                      {"max_iters", o.max_iters},
                      {"points", points},
                      {"loss_scale", p.loss_scale},
                      {"unit", unit},
                      {"activation", p.activation},
                      {"policy", p.str()},
                      {"format", compute_format(p)},
                      {"cost_config", text ? emu::language_model_config(o.model, o.batch).str()
                                      : emu::is_family_model(o.model)
                                          ? emu::fashion_mnist_family_config(o.model, o.batch).str()
                                          : cost::fashion_mnist_cost_config(o.model, o.batch)}};
  // Only for the language task: Fashion-MNIST's descriptors keep their text (and identity).
  if (text) {
    d["dataset"] = o.dataset;
    d["metric"] = "loss";
    d["target"] = o.target_loss;
  }
  return d;
}

}  // namespace tb
