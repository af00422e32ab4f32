#include "record/emulation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tb {

nlohmann::json to_json(const emu::SeedRun& r) {
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& [it, acc] : r.curve) curve.push_back({it, acc});
  return {{"seed", r.seed},
          {"iterations_to_target", r.iterations ? nlohmann::json(*r.iterations) : nlohmann::json()},
          {"reached", bool(r.iterations)},
          {r.loss_target ? "best_loss" : "best_accuracy",
           r.loss_target ? (r.best_loss ? nlohmann::json(*r.best_loss) : nlohmann::json())
                         : nlohmann::json(r.best_accuracy)},
          {"skipped_steps", r.skipped_steps},
          {"final_loss_scale", r.final_loss_scale},
          {"seconds", r.seconds},
          {"curve", curve},
          {"scaling", to_json(r.scaling)}};
}

nlohmann::json to_json(const std::vector<emu::ScalingSample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : samples) {
    out.push_back({{"point", s.point},
                   {"iteration", s.iteration},
                   {"amax", s.amax},
                   {"scale_min", s.scale_min},
                   {"scale_max", s.scale_max},
                   {"sites", s.sites},
                   {"values", s.values},
                   {"overflow", s.overflow},
                   {"underflow", s.underflow},
                   {"nonfinite", s.nonfinite}});
    // Only where false, and beside a numeric overflow: readers before it take the 0.
    if (!s.overflow_counted) out.back()["overflow_counted"] = false;
  }
  return out;
}

std::vector<emu::ScalingSample> scaling_from_json(const nlohmann::json& j) {
  std::vector<emu::ScalingSample> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    emu::ScalingSample s;
    s.point = e.value("point", "");
    s.iteration = e.value("iteration", int64_t(0));
    // JSON has no Inf: an Inf amax (an overflowed tensor) or scale is written as null.
    auto real = [&](const char* key, double absent) {
      if (!e.contains(key)) return absent;
      return e.at(key).is_number() ? e.at(key).get<double>() : HUGE_VAL;
    };
    s.amax = real("amax", 0.0);
    s.scale_min = real("scale_min", 1.0);
    s.scale_max = real("scale_max", 1.0);
    s.sites = e.value("sites", int64_t(0));
    s.values = e.value("values", uint64_t(0));
    s.overflow = e.value("overflow", uint64_t(0));
    s.overflow_counted = e.value("overflow_counted", true);
    s.underflow = e.value("underflow", uint64_t(0));
    s.nonfinite = e.value("nonfinite", uint64_t(0));
    out.push_back(s);
  }
  return out;
}

std::vector<nlohmann::json> seeds_json(const emu::EmulationResult& r) {
  std::vector<nlohmann::json> out;
  for (const auto& s : r.runs) out.push_back(to_json(s));
  return out;
}

namespace emu {

SeedSummary summarize_seeds(const std::vector<SeedRun>& runs) {
  SeedSummary s;
  s.runs = int(runs.size());
  std::vector<double> v;
  for (const auto& r : runs)
    if (r.iterations) v.push_back(double(*r.iterations));
  s.reached = int(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / (v.size() - 1)) : 0;
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  // MLPerf: drop the fastest and the slowest run and average the rest; only when every run
  // reached the target (a run that did not is not a number to average).
  if (s.reached == s.runs && v.size() >= 3)
    s.mlperf_mean = std::accumulate(v.begin() + 1, v.end() - 1, 0.0) / double(v.size() - 2);
  return s;
}

std::vector<ScalingSample> summarize_scaling(const std::vector<std::vector<ScalingSample>>& runs) {
  std::vector<ScalingSample> out;
  for (const auto& run : runs)
    for (const ScalingSample& s : run) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const ScalingSample& o) { return o.point == s.point; });
      if (it == out.end()) {
        out.push_back(s);
        continue;
      }
      it->iteration = std::max(it->iteration, s.iteration);
      it->amax = std::max(it->amax, s.amax);
      it->scale_min = std::min(it->scale_min, s.scale_min);
      it->scale_max = std::max(it->scale_max, s.scale_max);
      it->sites = std::max(it->sites, s.sites);
      it->values += s.values;
      it->overflow += s.overflow;
      it->overflow_counted = it->overflow_counted && s.overflow_counted;
      it->underflow += s.underflow;
      it->nonfinite += s.nonfinite;
    }
  return out;
}

}  // namespace emu
nlohmann::json emulation_fields(const emu::EmulationResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : r.runs) runs.push_back(to_json(run));
  const emu::SeedSummary& s = r.summary;
  nlohmann::json summary = {{"runs", s.runs}, {"reached", s.reached}};
  if (s.reached == s.runs) {
    summary["mean"] = s.mean;
    summary["stddev"] = s.stddev;
    summary["min"] = s.min;
    summary["max"] = s.max;
    summary["median"] = s.median;
    summary["mlperf_mean"] = s.mlperf_mean ? nlohmann::json(*s.mlperf_mean) : nlohmann::json();
  }
  const bool by_loss = r.options.target_loss > 0;
  return {{"model", r.options.model},
          {"dataset", r.options.dataset},
          {by_loss ? "target_loss" : "target_accuracy",
           by_loss ? r.options.target_loss : r.options.target},
          {"eval_every", r.options.eval_every},
          {"count_every", r.options.count_every},
          {"eval_examples", r.options.eval_examples},
          {"max_iters", r.options.max_iters},
          {"batch", r.options.batch},
          {"lr", r.options.lr},
          {"policy", r.policy},
          {"runs", runs},
          {"summary", summary}};
}

}  // namespace tb
