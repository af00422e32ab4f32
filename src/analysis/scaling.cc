#include "analysis/scaling.h"

#include <fmt/format.h>

#include <cmath>

#include "analysis/analysis.h"
#include "spec/family.h"

namespace tb {

std::vector<ScalingSeries> scaling(const RunSet& runs, const std::string& param) {
  std::map<std::string, ScalingSeries> by_key;
  for (const auto& r : runs.runs) {
    if (!r.ok()) continue;
    auto n = r.number(param);
    // A parameter left out of the config text at its default (workers=1) counts as that.
    const FamilySchema* schema = find_family_schema(r.family);
    const ParamSpec* spec = schema ? schema->find(param) : nullptr;
    const bool implicit = !n && spec && spec->omit_default && !r.params.count(param);
    if (implicit) n = std::stod(spec->default_value);
    const double thr = r.metric("examples_per_s");
    if (!n || *n < 1 || !std::isfinite(thr)) continue;
    // The config as written, with the scaled parameter shown as '*'.
    std::string key = r.config;
    auto at = key.find("," + param + "=");
    if (at == std::string::npos) at = key.find(":" + param + "=");
    if (at != std::string::npos) {
      ++at;
      const auto end = key.find(',', at);
      key.replace(at, (end == std::string::npos ? key.size() : end) - at, param + "=*");
    } else if (implicit) {
      key += "," + param + "=*";  // such parameters come last in the canonical order
    }
    key += " on " + r.platform + " / " + r.stack;
    auto& s = by_key[key];
    s.param = param, s.key = key, s.family = r.family, s.platform = r.platform, s.stack = r.stack;
    s.throughput[int(*n)] = thr;
    s.configs[int(*n)] = r.config;
    const double u = r.metric("flops_utilization");
    if (std::isfinite(u)) s.utilization[int(*n)] = u;
    const double c = r.metric("comm_share");
    if (std::isfinite(c)) s.comm_share[int(*n)] = c;
  }
  std::vector<ScalingSeries> out;
  for (auto& [k, s] : by_key) {
    if (s.throughput.size() < 2) continue;
    if (s.throughput.count(1)) {
      const double f = amdahl_serial_fraction(s.throughput);
      if (f > 1)
        s.amdahl_note = fmt::format(
            "slower with more {} than with one (fit {:.3g}): Amdahl's law, under which more never "
            "slows, does not describe it",
            param, f);
      else if (f < 0)
        s.amdahl_note = fmt::format(
            "faster than linear in {} (fit {:.3g}): Amdahl's law does not describe it", param, f);
      else
        s.serial_fraction = f;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tb
