#include "spec/suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/errors.h"

namespace tb {

std::vector<const FamilySchema*> reference_families() {
  std::vector<const FamilySchema*> out;
  for (const auto* s : family_schemas())
    if (s->is_reference()) out.push_back(s);
  return out;
}

std::vector<std::string> split_models(const std::string& text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(" \t") == std::string::npos) return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    // `fc,` or `fc,,lstm` is a list with a name left out, `fc,fc` one named twice: refused, as
    // a sweep file's duplicate values are, not read as the list without them.
    if (item.empty()) throw UsageError("--models '" + text + "': an empty name (a stray comma?)");
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw UsageError("--models '" + text + "': '" + item + "' is named twice");
    out.push_back(item);
    start = comma + 1;
  }
  return out;
}

namespace {

// A named config (gpt2-small) as a grid of one: its every value an axis of one value.
SweepGrid named_grid(const NamedConfig& n) {
  const Config c = parse_config(n.config);
  SweepGrid g{c.family(), {}};
  for (const auto& [k, v] : c.values()) g.axes.push_back({k, {v}});
  return g;
}

}  // namespace

SweepSpec suite_sweep(const std::vector<std::string>& models, bool batch_sweep) {
  std::vector<const FamilySchema*> chosen;
  std::vector<const NamedConfig*> named;
  if (models.empty()) {
    chosen = reference_families();
    named = named_configs();
  } else {
    std::set<std::string> seen;
    for (const auto& m : models) {
      if (!seen.insert(m).second) continue;
      if (const NamedConfig* n = find_named_config(m)) {
        named.push_back(n);
        continue;
      }
      const FamilySchema* s = find_family_schema(m);
      if (!s) {
        std::string names;
        for (const auto* r : reference_families()) names += (names.empty() ? "" : ", ") + r->name;
        for (const auto* n : named_configs()) names += (names.empty() ? "" : ", ") + n->name;
        throw UsageError(fmt::format("suite: unknown model '{}' (reference models: {})", m,
                                     names.empty() ? "none in this build" : names));
      }
      chosen.push_back(s);
    }
  }
  SweepSpec spec;
  spec.name = batch_sweep ? "suite-batch" : "suite";
  spec.origin = "built-in suite";
  spec.description = batch_sweep ? "reference models over their batch sweeps"
                                 : "reference models at their default configs";
  for (const auto* s : chosen) {
    SweepGrid g{s->name, {}};
    if (batch_sweep && !s->batch_sweep.empty()) {
      std::vector<int64_t> batches = s->batch_sweep;
      std::sort(batches.begin(), batches.end());
      batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
      SweepAxis axis{"batch", {}};
      for (int64_t b : batches) axis.values.push_back(std::to_string(b));
      g.axes.push_back(std::move(axis));
    }
    spec.grids.push_back(std::move(g));
  }
  // Named configs of generated families (gpt2-small, tinyllama-1.1b) run at their own batch.
  for (const auto* n : named) spec.grids.push_back(named_grid(*n));
  return spec;
}

std::vector<Config> suite_configs(const std::vector<std::string>& models, bool batch_sweep) {
  return expand_sweep(suite_sweep(models, batch_sweep));
}

}  // namespace tb
