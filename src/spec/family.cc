#include "spec/family.h"

#include <algorithm>
#include <map>
#include <memory>

#include "numerics/policy.h"

namespace tb {

const ParamSpec* FamilySchema::find(const std::string& param) const {
  for (const auto& p : params)
    if (p.name == param) return &p;
  return nullptr;
}

std::vector<ParamSpec> common_params(int64_t default_batch, const std::string& default_optimizer) {
  return {
      {"batch", "examples per training step", std::to_string(default_batch), 1, 1 << 20, {}},
      {"dtype", "number format of weights and activations", "fp32", 0, 0, {"fp32", "bf16"}},
      {"optimizer",
       "rmsprop (decay 0.9, momentum 0.9, eps 1.0, as ParaDnn), sgd, momentum (0.9), adam "
       "(betas 0.9, 0.999) or adamw (adam with decoupled weight decay 0.01)",
       default_optimizer,
       0,
       0,
       {"rmsprop", "sgd", "momentum", "adam", "adamw"}},
      // 0 means "all cores"; a result always records the number actually used.
      {"threads", "intra-op and BLAS threads (0 = all cores)", "0", 0, 4096, {}},
      {"device", "torch device: cpu, cuda, cuda:N", "cpu", 0, 0, {}},
      // Data-parallel worker processes, each with `batch` examples (docs/scale-out.md).
      {"workers",
       "data-parallel worker processes, each training on its own batch",
       "1",
       1,
       4096,
       {},
       true},
      // Emulated number formats (docs/numerics.md, "Formats in any family"); omitted at fp32
      // so that results stored before it existed keep their configs.
      {"numerics",
       "emulated number formats and operators: fp32, a format for every point (e4m3), or "
       "w:/a:/e:/g:/o:/m:/ls:/act:/unit: items joined by '+'",
       "fp32",
       0,
       0,
       {},
       true,
       [](const std::string& v) { return num::parse_numerics(v).str(); }},
  };
}

namespace {
std::map<std::string, FamilySchema>& registry() {
  static std::map<std::string, FamilySchema> r;
  return r;
}
}  // namespace

void register_family_schema(FamilySchema schema) {
  std::string name = schema.name;
  registry()[name] = std::move(schema);
}

const FamilySchema* find_family_schema(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<const FamilySchema*> family_schemas() {
  std::vector<const FamilySchema*> out;
  for (const auto& [name, schema] : registry()) out.push_back(&schema);
  return out;
}

namespace {
std::map<std::string, NamedConfig>& named_registry() {
  static std::map<std::string, NamedConfig> r;
  return r;
}
}  // namespace

void register_named_config(NamedConfig named) {
  std::string name = named.name;
  named_registry()[name] = std::move(named);
}

const NamedConfig* find_named_config(const std::string& name) {
  auto it = named_registry().find(name);
  return it == named_registry().end() ? nullptr : &it->second;
}

std::vector<const NamedConfig*> named_configs() {
  std::vector<const NamedConfig*> out;
  for (const auto& [name, n] : named_registry()) out.push_back(&n);
  return out;
}

}  // namespace tb
