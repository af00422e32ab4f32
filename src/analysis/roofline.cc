#include "analysis/roofline.h"

#include <cmath>

namespace tb {

std::vector<RooflineView> rooflines(const RunSet& set) {
  std::vector<RooflineView> out;
  for (const auto& info : set.platforms) {
    if (!info.description) continue;
    const PlatformDescription& d = *info.description;
    RooflineView v;
    v.platform = info.name;
    for (const auto& [dtype, tf] : d.peak_tflops)
      v.roofs.push_back(
          {dtype + " peak (" + (d.source.rfind("measured", 0) == 0 ? "measured" : "spec") + ")",
           "compute", d.source.rfind("measured", 0) == 0 ? "measured" : "spec", dtype, tf * 1e12});
    // A measured description keeps the datasheet formula's peaks beside its own.
    if (d.extra.contains("spec_peak_tflops") && d.extra["spec_peak_tflops"].is_object())
      for (const auto& [dtype, tf] : d.extra["spec_peak_tflops"].items())
        if (tf.is_number())
          v.roofs.push_back(
              {dtype + " peak (spec)", "compute", "spec", dtype, tf.get<double>() * 1e12});
    const bool measured = d.source.rfind("measured", 0) == 0;
    if (d.memory_bandwidth_gbps > 0)
      v.roofs.push_back({std::string("DRAM (") + (measured ? "measured" : "spec") + ")", "memory",
                         measured ? "measured" : "spec", "", d.bandwidth()});
    for (const auto& [level, gbps] : d.cache_bandwidth_gbps) {
      std::string name = level;
      for (auto& ch : name) ch = char(std::toupper(ch));
      v.roofs.push_back({name + " (measured)", "memory", "measured", "", gbps * 1e9});
    }
    for (const auto& [dtype, tf] : d.peak_tflops)
      if (auto r = d.ridge(dtype)) v.ridges.push_back({dtype, *r});
    for (const auto& r : set.runs) {
      if (r.platform != info.name || !r.ok()) continue;
      const double ai = r.metric("arithmetic_intensity"), f = r.metric("achieved_flops");
      if (std::isfinite(ai) && std::isfinite(f) && ai > 0 && f > 0) v.runs.push_back(&r);
    }
    for (const auto& pr : set.profiles) {
      if (pr.platform != info.name) continue;
      for (const auto& op : pr.profile.ops)
        if (op.flops > 0 && op.bytes > 0 && op.total_us > 0) v.ops.push_back({&pr.profile, &op});
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace tb
