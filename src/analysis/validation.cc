#include "analysis/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <optional>
#include <sstream>

#include "analysis/analysis.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"

namespace tb::sim {
namespace {

nlohmann::json stats_json(const ErrorStats& s) {
  nlohmann::json j = {{"runs", s.n},
                      {"median", s.median},
                      {"p90", s.p90},
                      {"median_ratio", s.median_ratio},
                      {"unstable", s.unstable},
                      {"runs_with_spread", s.with_spread}};
  for (const auto& [phase, r] : s.phase_ratio)
    j["phases"][phase] = {{"median_ratio", r.first}, {"runs", r.second}};
  j["median_spread"] = s.with_spread > 0 ? nlohmann::json(s.median_spread) : nlohmann::json();
  return j;
}

std::string describe_model(const PlatformDescription& d) {
  if (!d.efficiency) return "roofline (the description states no efficiency)";
  auto list = [](const std::map<std::string, std::vector<PlatformDescription::GemmPoint>>& m) {
    std::string curves;
    for (const auto& [dtype, c] : m)
      curves += fmt::format("{}{} {} points n={}..{}", curves.empty() ? "" : ", ", dtype, c.size(),
                            c.front().n, c.back().n);
    return curves.empty() ? std::string("no curve") : curves;
  };
  // "; <what>: fp32 12 points, bf16 15 points" for a rows table; "" without one.
  const auto table = [](const auto& by_dtype, const char* what) {
    std::string out;
    for (const auto& [dtype, pts] : by_dtype)
      out += fmt::format("{}{} {} points", out.empty() ? "" : ", ", dtype, pts.size());
    return out.empty() ? out : fmt::format("; {}: {}", what, out);
  };
  const std::string rows =
      table(d.efficiency->gemm_rows, "a linear layer's GEMMs at batch rows") +
      table(d.efficiency->conv_rows, "convolutions at output rows and channels");
  const std::string conv = d.efficiency->conv.empty() ? ""
                                                      : fmt::format(", convolution efficiency ({})",
                                                                    list(d.efficiency->conv));
  std::string ops;
  for (const auto& [op, ns] : d.efficiency->op_ns_per_element)
    ops += fmt::format("{}{} {:.2g}", ops.empty() ? "" : ", ", op, ns);
  if (!ops.empty()) ops = ", elementwise layers at their measured ns per element (" + ops + ")";
  std::string cells;
  for (const auto& [cell, us] : d.efficiency->cell_step_us)
    cells += fmt::format("{}{} {:.3g}", cells.empty() ? "" : ", ", cell, us);
  if (!cells.empty()) cells = " + us per recurrent time step (" + cells + ")";
  std::string gates;
  for (const auto& [cell, ns] : d.efficiency->cell_ns_per_element)
    gates += fmt::format("{}{} {:.2g}", gates.empty() ? "" : ", ", cell, ns);
  if (!gates.empty()) cells += " + ns per gate element and time step (" + gates + ")";
  std::string whole;
  for (const auto& [cell, pts] : d.efficiency->cell_step_table)
    whole += fmt::format("{}{}", whole.empty() ? "" : ", ", cell);
  if (!whole.empty())
    cells += ", fp32 recurrent layers on their measured per-step grid (" + whole + ")";
  std::string steps;
  for (const auto& [dtype, opts] : d.efficiency->optimizer_ns_per_param) {
    std::string one;
    for (const auto& [opt, ns] : opts)
      one += fmt::format("{}{} {:.2g}", one.empty() ? "" : ", ", opt, ns);
    steps += fmt::format("{}{}: {}", steps.empty() ? "" : "; ", dtype, one);
  }
  if (!steps.empty())
    cells += ", optimizer steps at their measured ns per parameter (" + steps + ")" +
             (d.efficiency->working_set.empty() ? "" : " moved to the step's working set");
  return fmt::format(
      "roofline x GEMM efficiency ({}){}{} + {:.3g} us per operator{}{}, from the "
      "description's efficiency{}",
      list(d.efficiency->gemm) + rows, conv, ops, d.efficiency->op_overhead_us,
      d.efficiency->conv_call_us > 0
          ? fmt::format(" + {:.3g} us per convolution phase", d.efficiency->conv_call_us)
          : "",
      cells,
      d.extra.contains("measurements") ? " (trainbench platform's micro-benchmarks, not these runs)"
                                       : "");
}

}  // namespace

ErrorStats error_stats(const std::vector<ValidationPoint>& points) {
  ErrorStats s;
  s.n = points.size();
  std::vector<double> e, r;
  for (const auto& p : points) {
    e.push_back(p.error());
    r.push_back(p.predicted_s / p.measured_s);
  }
  s.median = percentile(e, 50);
  s.p90 = percentile(e, 90);
  s.median_ratio = percentile(r, 50);
  std::vector<double> spreads;
  for (const auto& p : points) {
    if (std::isfinite(p.spread)) spreads.push_back(p.spread);
    s.unstable += p.unstable;
  }
  s.with_spread = spreads.size();
  if (!spreads.empty()) s.median_spread = percentile(spreads, 50);
  std::map<std::string, std::vector<double>> by_phase;
  for (const auto& p : points)
    for (const auto& [phase, t] : p.phases) by_phase[phase].push_back(t.first / t.second);
  for (const auto& [phase, ratios] : by_phase)
    s.phase_ratio[phase] = {percentile(ratios, 50), ratios.size()};
  return s;
}

namespace {

// Seconds since the epoch of a UTC "YYYY-MM-DDTHH:MM:SSZ"; nullopt where it does not parse or
// anything follows it (the text goes into a message only when it parses).
std::optional<double> utc_seconds(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail() || in.peek() != std::char_traits<char>::eof()) return std::nullopt;
  return double(timegm(&tm));
}

}  // namespace

double hours_apart(const std::string& at, const std::string& from, const std::string& to) {
  const auto a = utc_seconds(at), f = utc_seconds(from), t = utc_seconds(to);
  if (!a || !f || !t) return std::nan("");
  const double s = *a < *f ? *f - *a : *a > *t ? *a - *t : 0;
  return s / 3600;
}

std::vector<Validation> validate(const RunSet& runs,
                                 const std::optional<PlatformDescription>& description) {
  std::vector<Validation> out;
  for (const auto& info : runs.platforms) {
    const std::optional<PlatformDescription>& d = description ? description : info.description;
    if (!d) continue;
    Validation v;
    v.platform = info.name;
    v.description = d->name;
    v.model = describe_model(*d);
    for (const auto& r : runs.runs) {
      if (r.platform != info.name || !r.ok()) continue;
      double measured = r.metric("step_median_s");
      if (!(measured > 0)) measured = r.metric("step_mean_s");
      if (!(measured > 0)) {
        v.skipped.push_back(r.config + ": no measured step time");
        continue;
      }
      try {
        const Config c = parse_config(r.config);
        SimOptions o;
        if (d->kind == "cpu" && d->cores > 0 && c.has("threads")) {
          const int64_t t = c.get_int("threads");
          if (t > 0 && t < d->cores) o.peak_share = double(t) / d->cores;
        }
        const Simulation s = simulate_config(*d, c, "", o);
        ValidationPoint p{r.config, r.family, info.name, s.step_s, measured, s.bound()};
        const double max_over_min = r.metric("rep_max_over_min");
        if (r.repetitions() >= 2 && max_over_min >= 1) p.spread = max_over_min - 1;
        p.unstable = r.unstable();
        for (const auto& [phase, predicted] : s.phase_total_s) {
          const double measured = r.metric("phase_" + phase + "_s");
          if (measured > 0) p.phases[phase] = {predicted, measured};
        }
        v.points.push_back(std::move(p));
        if (!r.started_at.empty() && (v.runs_from.empty() || r.started_at < v.runs_from))
          v.runs_from = r.started_at;
        if (!r.finished_at.empty() && r.finished_at > v.runs_to) v.runs_to = r.finished_at;
      } catch (const std::exception& e) {
        v.skipped.push_back(r.config + ": " + e.what());
      }
    }
    if (d->extra.contains("measured_at") && d->extra["measured_at"].is_string())
      v.description_measured_at = d->extra["measured_at"].get<std::string>();
    v.hours_apart = hours_apart(v.description_measured_at, v.runs_from, v.runs_to);
    v.all = error_stats(v.points);
    std::map<std::string, std::vector<ValidationPoint>> fam;
    for (const auto& p : v.points) fam[p.family].push_back(p);
    for (const auto& [f, pts] : fam) v.per_family[f] = error_stats(pts);
    out.push_back(std::move(v));
  }
  return out;
}

nlohmann::json to_json(const Validation& v) {
  nlohmann::json points = nlohmann::json::array(), fam = nlohmann::json::object();
  for (const auto& p : v.points) {
    points.push_back({{"config", p.config},
                      {"family", p.family},
                      {"predicted_s", p.predicted_s},
                      {"measured_s", p.measured_s},
                      {"error", p.error()},
                      {"bound", p.bound},
                      {"unstable", p.unstable}});
    if (std::isfinite(p.spread)) points.back()["spread"] = p.spread;
    for (const auto& [phase, t] : p.phases)
      points.back()["phases"][phase] = {{"predicted_s", t.first}, {"measured_s", t.second}};
    if (!p.source.empty()) {
      auto& last = points.back();
      last["format"] = p.format;
      last["batch"] = p.batch;
      last["unit"] = p.unit;
      last["source"] = p.source;
      last["predicted_per_s"] = double(p.batch) / p.predicted_s;
      last["published_per_s"] = double(p.batch) / p.measured_s;
    }
  }
  for (const auto& [f, s] : v.per_family) fam[f] = stats_json(s);
  nlohmann::json when = {
      {"description_measured_at", v.description_measured_at.empty()
                                      ? nlohmann::json()
                                      : nlohmann::json(v.description_measured_at)},
      {"runs_from", v.runs_from.empty() ? nlohmann::json() : nlohmann::json(v.runs_from)},
      {"runs_to", v.runs_to.empty() ? nlohmann::json() : nlohmann::json(v.runs_to)},
      {"hours_apart",
       std::isfinite(v.hours_apart) ? nlohmann::json(v.hours_apart) : nlohmann::json()}};
  return {{"platform", v.platform}, {"description", v.description},
          {"model", v.model},       {"errors", stats_json(v.all)},
          {"per_family", fam},      {"points", points},
          {"skipped", v.skipped},   {"measured", when}};
}

std::string format_validation(const std::vector<Validation>& vs) {
  std::ostringstream o;
  for (const auto& v : vs) {
    // Named twice where --platform put another description in the stored one's place.
    o << fmt::format("platform {}{}: {} runs predicted, {} skipped\nmodel: {}\n", v.platform,
                     v.description.empty() || v.description == v.platform
                         ? ""
                         : fmt::format(" (predicted from the description {})", v.description),
                     v.points.size(), v.skipped.size(), v.model);
    o << fmt::format("{:<10} {:>5} {:>14} {:>14} {:>22} {:>16} {:>9}\n", "family", "runs",
                     "median error", "p90 error", "median pred/measured", "measured spread",
                     "unstable");
    auto row = [&](const std::string& name, const ErrorStats& s) {
      o << fmt::format("{:<10} {:>5} {:>13.1f}% {:>13.1f}% {:>22.3f} {:>16} {:>9}\n", name, s.n,
                       100 * s.median, 100 * s.p90, s.median_ratio,
                       s.with_spread > 0 ? fmt::format("{:.1f}%", 100 * s.median_spread) : "-",
                       s.unstable);
    };
    for (const auto& [f, s] : v.per_family) row(f, s);
    row("all", v.all);
    // Where a miss sits: each phase's median predicted / measured, per family.
    bool any = false;
    for (const auto& [f, s] : v.per_family) {
      if (s.phase_ratio.empty()) continue;
      if (!any) o << "by phase (median predicted / measured, runs that timed their phases):\n";
      any = true;
      o << fmt::format("{:<10}", f);
      for (const char* ph : {"forward", "backward", "optimizer"})
        if (s.phase_ratio.count(ph))
          o << fmt::format(" {} {:.3f} ({})", ph, s.phase_ratio.at(ph).first,
                           s.phase_ratio.at(ph).second);
      o << "\n";
    }
    if (v.all.with_spread > 0)
      o << fmt::format(
          "measured spread: the median over runs of max/min - 1 of their processes' means; an "
          "error below it is within what the measurements themselves disagree by{}\n",
          v.all.unstable > 0
              ? fmt::format(" ({} of {} runs unstable: their processes disagree beyond their CIs)",
                            v.all.unstable, v.all.n)
              : "");
    // Half an hour: the demo's own sweep takes minutes; hours is where the development VM's
    // speed was seen to move (the same config 1.9 vs 2.6 ms a step six hours apart).
    if (std::isfinite(v.hours_apart) && v.hours_apart > 0.5)
      o << fmt::format(
          "measured apart: the description at {}, the runs {} to {}, {:.1f} hours between them; "
          "a shared host's speed drifts over hours, so part of each error may be the machine's "
          "(`trainbench platform --refresh` beside the runs compares like with like)\n",
          v.description_measured_at, v.runs_from, v.runs_to, v.hours_apart);
    for (const auto& s : v.skipped) o << "  skipped " << s << "\n";
    o << "\n";
  }
  return o.str();
}

}  // namespace tb::sim
