#include "record/repetitions.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "record/json.h"
#include "record/step_stats.h"

namespace tb {

using nlohmann::json;

namespace {
double num(const json& j, const char* key, double fallback) { return number_or(j, key, fallback); }
}  // namespace

bool repetitions_disagree(const std::vector<double>& means,
                          const std::vector<double>& half_widths) {
  if (means.size() < 2 || means.size() != half_widths.size()) return false;
  const auto lo = std::min_element(means.begin(), means.end()) - means.begin();
  const auto hi = std::max_element(means.begin(), means.end()) - means.begin();
  if (!(means[lo] > 0)) return false;
  // An interval that is not finite (a process of one sample) overlaps everything.
  const double hw_lo = std::isfinite(half_widths[lo]) ? half_widths[lo] : INFINITY;
  const double hw_hi = std::isfinite(half_widths[hi]) ? half_widths[hi] : INFINITY;
  const bool beyond_cis = means[hi] - hw_hi > means[lo] + hw_lo;
  return beyond_cis && means[hi] / means[lo] > 1 + kUnstableSpread;
}

json repetition_entry(const json& r) {
  auto field = [&](const json& j, const char* k, const json& fallback) {
    return j.is_object() && j.contains(k) ? j[k] : fallback;
  };
  const json metrics = field(r, "metrics", json::object());
  return {{"started_at", field(r, "started_at", "")},
          {"finished_at", field(r, "finished_at", "")},
          {"timing", field(r, "timing", json::object())},
          {"step_times_s", field(r, "step_times_s", json::array())},
          {"cpu_utilization_process", field(metrics, "cpu_utilization_process", nullptr)},
          {"cpu_utilization_system", field(metrics, "cpu_utilization_system", nullptr)},
          {"cpu_utilization_per_core", field(metrics, "cpu_utilization_per_core", json::array())},
          {"core_round_trip_ns", field(metrics, "core_round_trip_ns", nullptr)}};
}

void mark_single_process(json& r) {
  r["repetitions"] = {{"count", 1}, {"between_processes", nullptr}, {"runs", json::array()}};
  r["unstable"] = false;
}

json combine_repetitions(const json& latest, const std::vector<json>& entries) {
  json out = latest;
  if (entries.empty()) return out;
  const size_t n = entries.size();
  std::vector<double> means, half;
  for (const auto& e : entries) {
    means.push_back(num(e["timing"], "mean_s", 0.0));
    half.push_back(num(e["timing"], "ci95_half_width_s", NAN));
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return means[a] < means[b]; });
  // The headline is one process's, the median one (the lower of the two middle ones for an even
  // N), so that the timing block around it describes a process that ran: with the median of
  // two processes far apart (an unstable result) the headline had stood outside its own
  // block's min and max. The between-process median stays the usual one.
  const json& mid = entries[order[(n - 1) / 2]];
  const double headline = means[order[(n - 1) / 2]];
  const double median =
      n % 2 ? means[order[n / 2]] : 0.5 * (means[order[n / 2 - 1]] + means[order[n / 2]]);

  out["started_at"] = entries.front()["started_at"];
  out["finished_at"] = entries.back()["finished_at"];
  out["timing"] = mid["timing"];
  out["step_times_s"] = mid["step_times_s"];
  json& m = out["metrics"];
  for (const char* k : {"cpu_utilization_process", "cpu_utilization_system",
                        "cpu_utilization_per_core", "core_round_trip_ns"})
    m[k] = mid.value(k, json(nullptr));
  if (headline > 0) {
    m["examples_per_s"] = num(m, "examples_per_step", 0.0) / headline;
    m["units_per_s"] = num(m, "units_per_step", 0.0) / headline;
    const double flops = num(out["cost"], "flops_per_step", 0.0) / headline;
    m["achieved_flops"] = flops;
    if (m.contains("peak_flops") && m["peak_flops"].is_number() &&
        m["peak_flops"].get<double>() > 0)
      m["flops_utilization"] = flops / m["peak_flops"].get<double>();
    if (out.contains("roofline") && out["roofline"].is_object()) {
      json& roof = out["roofline"];
      roof["achieved_flops"] = flops;
      const double attainable = num(roof, "attainable_flops", 0.0);
      if (attainable > 0) roof["fraction_of_roof"] = flops / attainable;
    }
  }

  json between = nullptr;
  if (n >= 2) {
    const Interval ci = mean_interval(means, 0.95);  // Student's t over the N process means
    const double mean = std::accumulate(means.begin(), means.end(), 0.0) / double(n);
    double ss = 0;
    for (double v : means) ss += (v - mean) * (v - mean);
    const double sd = std::sqrt(ss / double(n - 1));
    const double lo = means[order.front()], hi = means[order.back()];
    between = {{"median_s", median},
               {"mean_s", mean},
               {"min_s", lo},
               {"max_s", hi},
               {"stddev_s", sd},
               {"cv", mean > 0 ? sd / mean : 0.0},
               {"max_over_min", lo > 0 ? hi / lo : 0.0},
               {"ci95_half_width_s", ci.half_width},
               {"ci95_relative", median > 0 ? ci.half_width / median : 0.0}};
  }
  std::vector<double> within;
  for (size_t k = 0; k < n; ++k)
    if (means[k] > 0 && std::isfinite(half[k])) within.push_back(half[k] / means[k]);
  out["repetitions"] = {
      {"count", n},
      {"between_processes", between},
      {"within_process_ci95_relative",
       within.empty() ? json(nullptr)
                      : json{{"min", *std::min_element(within.begin(), within.end())},
                             {"max", *std::max_element(within.begin(), within.end())}}},
      {"runs", entries}};
  out["unstable"] = repetitions_disagree(means, half);
  return out;
}

namespace {
bool ok(const json& r) { return r.is_object() && r.value("status", "") == "ok"; }
std::vector<json> entries_of(const json& r) {
  const json runs =
      r.contains("repetitions") ? r["repetitions"].value("runs", json::array()) : json::array();
  if (!runs.empty()) return runs.get<std::vector<json>>();
  return {repetition_entry(r)};
}
}  // namespace

int repetition_count(const json& r) {
  if (!ok(r)) return 0;
  return int(entries_of(r).size());
}

json add_repetition(const json& previous, const json& next) {
  if (previous.is_null()) return ok(next) ? combine_repetitions(next, entries_of(next)) : next;
  if (!ok(previous)) return previous;
  std::vector<json> entries = entries_of(previous);
  if (!ok(next)) {
    json failed = next;
    failed["repetitions"] = {{"count", entries.size()}, {"runs", entries}};
    return failed;
  }
  for (const auto& e : entries_of(next)) entries.push_back(e);
  return combine_repetitions(next, entries);
}

RoundDrift round_drift(const std::vector<json>& results, int rounds) {
  RoundDrift d;
  if (rounds < 2) return d;
  // Only configs with a process in every round, cut to the first `rounds` (a stored result may
  // hold more than this sweep asked for): a round reached by a few configs would show their own
  // spread as the round's.
  struct Config {
    std::vector<double> means, half;
    bool unstable;
  };
  std::vector<Config> configs;
  for (const auto& r : results) {
    if (!ok(r) || repetition_count(r) < rounds) continue;
    Config c{{}, {}, r.value("unstable", false)};
    for (const auto& e : entries_of(r)) {
      if (int(c.means.size()) == rounds) break;
      const json t = e.value("timing", json::object());
      c.means.push_back(num(t, "mean_s", 0.0));
      c.half.push_back(num(t, "ci95_half_width_s", NAN));
    }
    if (std::all_of(c.means.begin(), c.means.end(), [](double m) { return m > 0; }))
      configs.push_back(std::move(c));
  }
  if (configs.size() < 2) return d;
  const auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  // rel[c][k]: config c's k-th process over its median.
  std::vector<std::vector<double>> rel;
  for (const auto& c : configs) {
    const double med = median_of(c.means);
    rel.emplace_back();
    for (double m : c.means) rel.back().push_back(m / med);
  }
  const auto round_values = [&](int k, size_t skip) {
    std::vector<double> v;
    for (size_t c = 0; c < rel.size(); ++c)
      if (c != skip) v.push_back(rel[c][size_t(k)]);
    return v;
  };
  for (int k = 0; k < rounds; ++k) {
    const auto v = round_values(k, rel.size());
    d.rounds.push_back({k + 1, v.size(), median_of(v), *std::min_element(v.begin(), v.end()),
                        *std::max_element(v.begin(), v.end())});
  }
  for (size_t c = 0; c < configs.size(); ++c) {
    if (!configs[c].unstable) continue;
    ++d.unstable;
    // The round's shift without this config: with few configs its own swing would otherwise
    // be half the shift it is divided by.
    std::vector<double> means = configs[c].means, half = configs[c].half;
    for (int k = 0; k < rounds; ++k) {
      const double shift = median_of(round_values(k, c));
      means[size_t(k)] /= shift;
      half[size_t(k)] /= shift;
    }
    d.unstable_within_drift += !repetitions_disagree(means, half);
  }
  return d;
}

}  // namespace tb
