// Findings are sentences filled from the numbers of a summary: which hyperparameter
// matters most, who wins a comparison, where runs sit on the roofline. A finding is
// only written when its numbers exist.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "analysis/summary.h"

namespace tb {
namespace {

// A metric's value as people read it: fractions as percentages, big numbers with SI prefixes.
std::string show(const MetricInfo& m, double v) {
  if (m.unit.rfind("fraction", 0) == 0) return fmt::format("{:.1f}%", 100 * v);
  const double a = std::abs(v);
  if (a >= 1e12) return fmt::format("{:.3g} T", v / 1e12);
  if (a >= 1e9) return fmt::format("{:.3g} G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g} M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g} k", v / 1e3);
  return fmt::format("{:.3g}", v);
}

std::string weight_text(const MetricInfo& m, double w) {
  if (m.unit.rfind("fraction", 0) == 0) return fmt::format("{:+.1f} points", 100 * w);
  return (w >= 0 ? "+" : "") + show(m, w);
}

// Profiles whose operators carry model parts (gpt): where the attention scores overtake the
// MLP in time (forward and backward) as seq grows, per platform and d_model. At each seq the
// ratio is the median over the profiled variants (heads, activation, experts, ...).
void observe_parts(const RunSet& runs, std::vector<Observation>& out) {
  // (platform, family, d_model) -> seq -> attention scores' time over the MLP's
  std::map<std::tuple<std::string, std::string, int64_t>, std::map<int64_t, std::vector<double>>>
      groups;
  for (const auto& pr : runs.profiles) {
    const auto parts = pr.profile.part_self_us();
    const auto attn = parts.find("attention_scores"), mlp = parts.find("mlp");
    if (attn == parts.end() || mlp == parts.end() || mlp->second <= 0) continue;
    std::string family;
    const auto params = config_params(pr.profile.config, &family);
    if (!params.count("seq") || !params.count("d_model")) continue;
    groups[{pr.platform, family, std::stoll(params.at("d_model"))}][std::stoll(params.at("seq"))]
        .push_back(attn->second / mlp->second);
  }
  size_t written = 0;
  for (const auto& [key, by_seq] : groups) {
    const auto& [platform, family, d_model] = key;
    std::vector<std::pair<int64_t, double>> series;  // seq, median ratio
    size_t variants = 0;
    for (const auto& [seq, ratios] : by_seq) {
      series.push_back({seq, percentile(ratios, 50)});
      variants = std::max(variants, ratios.size());
    }
    std::string list;
    for (size_t i = 0; i < series.size() && i < 6; ++i)
      list += fmt::format("{}{:.2f}x at seq={}", i ? ", " : "", series[i].second, series[i].first);
    if (series.size() > 6) list += ", ...";
    size_t first = 0;
    while (first < series.size() && series[first].second <= 1) ++first;
    std::string verdict;
    if (first == series.size())
      verdict = "the MLP takes longer at every profiled seq";
    else if (first == 0)
      verdict = fmt::format("the attention scores take longer already at seq={}", series[0].first);
    else
      verdict = fmt::format("the attention scores overtake the MLP between seq={} and seq={}",
                            series[first - 1].first, series[first].first);
    out.push_back(
        {fmt::format("On {}, {} d_model={}: the attention scores' time (forward and backward, "
                     "profiled) over the MLP's is {}{}: {}",
                     platform, family, d_model, list,
                     variants > 1 ? fmt::format(" (median of up to {} variants)", variants) : "",
                     verdict),
         chart_id("oproof", platform)});
    if (++written >= 8) break;
  }
}

}  // namespace

std::vector<Observation> observe(const RunSet& runs, const Summary& s) {
  std::vector<Observation> out;
  const MetricInfo& m = metric_info(s.metric);

  for (const auto& f : s.families) {
    if (!f.regression || f.regression->log2_scaled.empty()) continue;
    const Regression& r = *f.regression;
    size_t top = 0;
    for (size_t i = 0; i < r.log2_scaled.size(); ++i)
      if (std::abs(r.weights[i]) > std::abs(r.weights[top])) top = i;
    std::string text = fmt::format(
        "{} has the largest {} weight on {} {}: {} per standard deviation of {}{} "
        "(linear fit over {} runs, R\u00b2 = {:.2f})",
        r.terms[top], r.weights[top] >= 0 ? "positive" : "negative", f.family, m.label,
        weight_text(m, r.weights[top]), r.log2_scaled[top] ? "log2 " : "", r.terms[top], r.samples,
        r.r2);
    if (r.log2_scaled.size() > 1) {
      size_t second = top == 0 ? 1 : 0;
      for (size_t i = 0; i < r.log2_scaled.size(); ++i)
        if (i != top && std::abs(r.weights[i]) > std::abs(r.weights[second])) second = i;
      text += fmt::format("; next is {} ({})", r.terms[second], weight_text(m, r.weights[second]));
    }
    out.push_back({text, chart_id("sens", f.family)});
  }

  for (const auto& c : s.comparisons) {
    if (c.stats.matched.empty()) continue;
    const double g = c.stats.geomean;
    const std::string what =
        c.axis == "platform" || c.axis == "stack" ? c.axis + " " : c.axis + "=";
    std::string text = fmt::format(
        "{}{} is {:.2f}x {} than {}{} in geometric mean over {} matched configs, and faster on "
        "{:.0f}% of them",
        what, c.b, g >= 1 ? g : 1 / g, g >= 1 ? "faster" : "slower", what, c.a,
        c.stats.matched.size(), 100 * c.stats.share_b_faster);
    if (!c.flips.empty())
      text += fmt::format("; the winner flips on {} configs, most clearly {} ({:.2f}x)",
                          c.flips.size(), c.flips.front().config, c.flips.front().speedup);
    if (!c.unstable.empty())
      text += fmt::format(
          "; {} of the matched configs rest on an UNSTABLE run (processes "
          "disagree), e.g. {}",
          c.unstable.size(), c.unstable.front());
    out.push_back({text, chart_id("cmp", c.axis + "_" + c.b)});
    for (const auto& [fam, r] : c.regression_by_family) {
      const auto ranked = ranked_params(r);
      if (ranked.empty()) continue;
      const auto it = std::find(r.terms.begin(), r.terms.end(), ranked[0]);
      const double w = r.weights[size_t(it - r.terms.begin())];
      out.push_back(
          {fmt::format("For {}, the {} speedup of {} over {} {} most with {} ({:+.3f} per standard "
                       "deviation, R\u00b2 = {:.2f})",
                       fam, c.axis, c.b, c.a, w >= 0 ? "grows" : "shrinks", ranked[0], w, r.r2),
           chart_id("cmp", c.axis + "_" + c.b)});
    }
  }

  for (const auto& v : s.rooflines) {
    if (v.runs.empty() || !runs.platforms.size()) continue;
    const PlatformDescription* d = nullptr;
    for (const auto& p : runs.platforms)
      if (p.name == v.platform && p.description) d = &*p.description;
    if (!d) continue;
    size_t memory_bound = 0, placed = 0;
    std::vector<double> fractions;
    for (const Run* r : v.runs) {
      const std::string dtype = r->params.count("dtype") ? r->params.at("dtype") : "fp32";
      const auto ridge = d->ridge(dtype);
      const auto roof = d->attainable(dtype, r->metric("arithmetic_intensity"));
      if (!ridge || !roof) continue;
      ++placed;
      memory_bound += r->metric("arithmetic_intensity") < *ridge;
      fractions.push_back(r->metric("achieved_flops") / *roof);
    }
    if (!placed) continue;
    out.push_back(
        {fmt::format("On {}, {} of {} runs have arithmetic intensity below the ridge point "
                     "(memory-bound); the median run reaches {:.0f}% of the roof above it",
                     v.platform, memory_bound, placed, 100 * percentile(fractions, 50)),
         chart_id("roof", v.platform)});
  }

  if (s.boxes.size() >= 2) {
    std::vector<const BoxGroup*> g;
    for (const auto& b : s.boxes) g.push_back(&b);
    std::sort(g.begin(), g.end(), [](auto* a, auto* b) { return a->stats.p50 > b->stats.p50; });
    std::string list;
    for (const auto* b : g)
      list += (list.empty() ? "" : ", ") + fmt::format("{} {}", b->group, show(m, b->stats.p50));
    out.push_back(
        {fmt::format("Median {} by group: {}; {} is highest, {:.1f}x the lowest", m.label, list,
                     g.front()->group,
                     g.back()->stats.p50 > 0 ? g.front()->stats.p50 / g.back()->stats.p50 : 0),
         chart_id("box")});
  } else if (s.boxes.size() == 1) {
    const auto& b = s.boxes.front();
    out.push_back({fmt::format("{} {}: median {}, 2nd-98th percentile {} to {}, over {} runs",
                               b.group, m.label, show(m, b.stats.p50), show(m, b.stats.p2),
                               show(m, b.stats.p98), b.stats.n),
                   chart_id("box")});
  }

  for (const auto& sc : s.scaling) {
    if (std::isnan(sc.serial_fraction)) continue;
    const int top = sc.throughput.rbegin()->first;
    out.push_back(
        {fmt::format("{}: {:.2f}x throughput at {} {} over 1; Amdahl's non-parallel fraction "
                     "fitted from it is {:.2f}",
                     sc.key, sc.throughput.at(top) / sc.throughput.at(1), top, sc.param,
                     sc.serial_fraction),
         chart_id("scaling")});
    if (out.size() > 40) break;
  }

  for (const auto& f : s.families) {
    size_t total = 0, failed = 0;
    std::string parts;
    for (const auto& [st, n] : f.by_status) {
      total += n;
      if (st == "ok") continue;
      failed += n;
      parts += (parts.empty() ? "" : ", ") + fmt::format("{} {}", n, st);
    }
    if (!failed) continue;
    out.push_back({fmt::format("{} of {} {} configs did not produce a measurement: {}", failed,
                               total, f.family, parts),
                   f.heat ? chart_id("heat", f.family) : chart_id("box")});
  }

  // Repetitions in fresh processes: how far the same config moves between processes, and
  // which runs moved beyond their own CIs (record/repetitions.h).
  {
    size_t measured = 0, repeated = 0;
    std::vector<double> spreads;
    std::vector<const Run*> unstable;
    for (const auto& r : runs.runs) {
      if (!r.ok()) continue;
      ++measured;
      if (r.repetitions() >= 2) {
        ++repeated;
        const double s = r.metric("rep_max_over_min");
        if (std::isfinite(s)) spreads.push_back(s);
      }
      if (r.unstable()) unstable.push_back(&r);
    }
    if (measured && !repeated)
      out.push_back({fmt::format("All {} measured runs rest on one process each: the spread of the "
                                 "same config between processes was not measured (sweep "
                                 "--repetitions 2 or more measures it)",
                                 measured),
                     chart_id("box")});
    else if (repeated)
      out.push_back(
          {fmt::format("{} of {} measured runs were repeated in fresh processes; the slowest "
                       "process's mean over the fastest's is {:.3f} in the median run and {:.3f} "
                       "at the 90th percentile",
                       repeated, measured, percentile(spreads, 50), percentile(spreads, 90)),
           chart_id("box")});
    if (!unstable.empty()) {
      std::string list;
      for (size_t i = 0; i < unstable.size() && i < 3; ++i)
        list += fmt::format("{}{} ({:.2f}x)", i ? ", " : "", unstable[i]->config,
                            unstable[i]->metric("rep_max_over_min"));
      out.push_back({fmt::format("{} runs are UNSTABLE: their processes' means disagree beyond "
                                 "their own confidence intervals, so one process's number would "
                                 "not reproduce; heat-map cells and speedups resting on them are "
                                 "marked: {}{}",
                                 unstable.size(), list, unstable.size() > 3 ? ", ..." : ""),
                     chart_id("box")});
    }
  }

  observe_parts(runs, out);

  size_t loose = 0, ok = 0;
  std::vector<double> cis;
  for (const auto& r : runs.runs) {
    if (!r.ok()) continue;
    ++ok;
    if (r.end_reason == "budget") {
      ++loose;
      const double ci = r.metric("ci95_relative");
      if (std::isfinite(ci)) cis.push_back(ci);
    }
  }
  // A run of one timed step has no interval: counted apart, not left out of the median as if
  // it had none to report (2 of 2 runs at "+-1.2%" when one of them had one sample).
  const size_t without = loose - cis.size();
  if (loose)
    out.push_back(
        {fmt::format(
             "{} of {} measured runs reached their time budget before the confidence target; "
             "{}{}, so read smaller differences with care",
             loose, ok,
             cis.empty() ? std::string()
             : without
                 ? fmt::format(
                       "the {} with an interval have a median 95% interval of \u00b1{:.1f}% "
                       "of the mean step time",
                       cis.size(), 100 * percentile(cis, 50))
                 : fmt::format("their median 95% interval is \u00b1{:.1f}% of the mean step time",
                               100 * percentile(cis, 50)),
             without ? fmt::format("{}{} timed one step only and {} no interval at all",
                                   cis.empty() ? "" : "; ", without, without == 1 ? "has" : "have")
                     : std::string()),
         chart_id("box")});
  return out;
}

}  // namespace tb
