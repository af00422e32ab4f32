#include "report/analysis_views.h"

#include <fmt/format.h>

#include <cmath>

#include "record/json.h"
#include "store/export.h"

namespace tb {

using json = nlohmann::ordered_json;

namespace {

std::string show(const std::string& metric, double v) {
  const MetricInfo& m = metric_info(metric);
  if (m.unit.rfind("fraction", 0) == 0) return fmt::format("{:.1f}%", 100 * v);
  return fmt::format("{:.4g}", v);
}

json nullable(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

View sensitivity_view(const std::string& family, const Regression& r, const std::string& metric) {
  View v;
  v.text = fmt::format("{}: sensitivity of {} ({} runs, R^2 = {:.3f}, intercept {})\n", family,
                       metric_info(metric).label, r.samples, r.r2, show(metric, r.intercept));
  v.text += fmt::format("  {:<24} {:>12}  {}\n", "hyperparameter", "weight", "input");
  v.rows = json::array();
  // A weight a billion times below the largest is the solver's rounding of a zero (a
  // hyperparameter the metric does not depend on): printed as 0, not -7.276e-12.
  double largest = 0;
  for (const double w : r.weights) largest = std::max(largest, std::fabs(w));
  const auto shown = [&](double w) { return std::fabs(w) < 1e-9 * largest ? 0.0 : w; };
  for (const auto& term : ranked_params(r)) {
    const size_t i = size_t(std::find(r.terms.begin(), r.terms.end(), term) - r.terms.begin());
    v.text += fmt::format("  {:<24} {:>+12.4g}  {}\n", term, shown(r.weights[i]),
                          r.log2_scaled[i] ? "log2, standardized" : "standardized");
  }
  for (size_t i = r.log2_scaled.size(); i < r.terms.size(); ++i)
    v.text += fmt::format("  {:<24} {:>+12.4g}  product\n", r.terms[i], shown(r.weights[i]));
  for (size_t i = 0; i < r.terms.size(); ++i)
    v.rows.push_back(
        {{"family", family},
         {"term", r.terms[i]},
         {"weight", r.weights[i]},
         {"input", i < r.log2_scaled.size() ? (r.log2_scaled[i] ? "log2" : "linear") : "product"}});
  v.json = {{"family", family},         {"metric", metric},     {"r2", r.r2},
            {"intercept", r.intercept}, {"samples", r.samples}, {"terms", v.rows}};
  return v;
}

View heat_view(const std::string& family, const HeatMap& h, const std::string& metric) {
  View v;
  std::string fixed;
  for (const auto& [k, val] : h.fixed) fixed += (fixed.empty() ? "" : ",") + k + "=" + val;
  if (h.aggregated)
    v.text = fmt::format(
        "{}: median {} over {} (columns) and {} (rows), aggregated over the other "
        "hyperparameters (runs per cell below); fixed: {}\n",
        family, metric_info(metric).label, h.x, h.y, fixed.empty() ? "-" : fixed);
  else
    v.text = fmt::format("{}: {} over {} (columns) and {} (rows); fixed: {}\n", family,
                         metric_info(metric).label, h.x, h.y, fixed.empty() ? "-" : fixed);
  v.text += fmt::format("{:>10} |", h.y + "\\" + h.x);
  for (double x : h.xs) v.text += fmt::format(" {:>9g}", x);
  v.text += "\n";
  v.rows = json::array();
  for (auto yi = h.ys.rbegin(); yi != h.ys.rend(); ++yi) {
    v.text += fmt::format("{:>10g} |", *yi);
    for (const auto& c : h.cells) {
      if (c.y != *yi) continue;
      std::string cell = c.value ? show(metric, *c.value) : c.status == "not-run" ? "." : c.status;
      // A status word may be shortened to fit; a number never is (its exponent is in the tail).
      if (!c.value && cell.size() > 8) cell = cell.substr(0, 8);
      if (c.unstable) cell += "!";
      v.text += fmt::format(" {:>9}", cell);
    }
    v.text += "\n";
  }
  if (h.aggregated) {
    v.text += fmt::format("runs per cell\n{:>10} |", h.y + "\\" + h.x);
    for (double x : h.xs) v.text += fmt::format(" {:>9g}", x);
    v.text += "\n";
    for (auto yi = h.ys.rbegin(); yi != h.ys.rend(); ++yi) {
      v.text += fmt::format("{:>10g} |", *yi);
      for (const auto& c : h.cells)
        if (c.y == *yi) v.text += fmt::format(" {:>9}", c.runs);
      v.text += "\n";
    }
  }
  for (const auto& c : h.cells)
    v.rows.push_back({{h.x, c.x},
                      {h.y, c.y},
                      {"value", c.value ? json(*c.value) : json(nullptr)},
                      {"status", c.status},
                      {"error", c.error},
                      {"config", c.config},
                      {"unstable", c.unstable},
                      {"runs", c.runs}});
  v.text += h.aggregated
                ? "  (. never run; other words: the status of most of its runs; ! a run in the "
                  "cell is unstable)\n"
                : "  (. never run; other words: the run's status; ! unstable: its processes "
                  "disagree)\n";
  v.json = {{"family", family}, {"metric", metric}, {"x", h.x},
            {"y", h.y},         {"fixed", h.fixed}, {"aggregated", h.aggregated},
            {"xs", h.xs},       {"ys", h.ys},       {"cells", v.rows}};
  return v;
}

View box_view(const std::vector<BoxGroup>& boxes, const std::string& metric) {
  View v;
  v.text = fmt::format("{} by group (percentiles 2, 9, 50, 91, 98)\n", metric_info(metric).label);
  v.text += fmt::format("  {:<24} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "group", "n",
                        "p2", "p9", "p50", "p91", "p98", "outliers");
  v.rows = json::array();
  for (const auto& b : boxes) {
    v.text +=
        fmt::format("  {:<24} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}\n", b.group, b.stats.n,
                    show(metric, b.stats.p2), show(metric, b.stats.p9), show(metric, b.stats.p50),
                    show(metric, b.stats.p91), show(metric, b.stats.p98), b.stats.outliers.size());
    v.rows.push_back({{"group", b.group},
                      {"n", b.stats.n},
                      {"p2", b.stats.p2},
                      {"p9", b.stats.p9},
                      {"p50", b.stats.p50},
                      {"p91", b.stats.p91},
                      {"p98", b.stats.p98},
                      {"outliers", b.stats.outliers.size()}});
  }
  v.json = {{"metric", metric}, {"groups", v.rows}};
  return v;
}

View roofline_view(const std::vector<RooflineView>& views) {
  View v;
  v.rows = json::array();
  v.json = json::array();
  for (const auto& rv : views) {
    v.text += rv.platform + ": roofs\n";
    json roofs = json::array(), ridges = json::array();
    for (const auto& r : rv.roofs) {
      v.text += fmt::format("  {:<24} {:>12.4g} {}\n", r.label, r.value,
                            r.kind == "compute" ? "FLOP/s" : "B/s");
      roofs.push_back({{"label", r.label},
                       {"kind", r.kind},
                       {"source", r.source},
                       {"dtype", r.dtype},
                       {"value", r.value}});
    }
    for (const auto& [d, x] : rv.ridges) {
      v.text += fmt::format("  ridge {:<18} {:>12.4g} FLOP/B\n", d, x);
      ridges.push_back({{"dtype", d}, {"intensity", x}});
    }
    v.text += fmt::format("  {} runs placed\n", rv.runs.size());
    json points = json::array();
    for (const Run* r : rv.runs) {
      json p = {{"platform", rv.platform},
                {"config", r->config},
                {"intensity", r->metric("arithmetic_intensity")},
                {"achieved_flops", r->metric("achieved_flops")},
                {"flops_utilization", nullable(r->metric("flops_utilization"))}};
      v.rows.push_back(p);
      points.push_back(p);
    }
    v.json.push_back(
        {{"platform", rv.platform}, {"roofs", roofs}, {"ridges", ridges}, {"runs", points}});
  }
  if (views.empty())
    v.text = "no platform description in the store(s): run `trainbench platform` before sweeping\n";
  v.json = {{"rooflines", v.json}};
  return v;
}

View comparison_view(const ComparisonView& c) {
  View v;
  const auto& s = c.stats;
  v.text = fmt::format("{} {} vs {} on {} ({} matched configs; {} only on {}, {} only on {})\n",
                       c.axis, c.b, c.a, c.metric, s.matched.size(), s.only_a, c.a, s.only_b, c.b);
  if (s.matched.empty())  // as the JSON's null: no speedup, not a speedup of 0
    v.text += fmt::format("  no config was measured with both {} and {}: no speedup\n", c.a, c.b);
  else
    v.text += fmt::format(
        "  geometric-mean speedup of {} over {}: {:.3f}; {} faster on {:.0f}% of configs\n", c.b,
        c.a, s.geomean, c.b, 100 * s.share_b_faster);
  for (const auto& [fam, fc] : c.by_family)
    if (!fc.matched.empty())
      v.text += fmt::format("  {:<10} {:>5} configs  geomean {:.3f}  {} faster on {:.0f}%\n", fam,
                            fc.matched.size(), fc.geomean, c.b, 100 * fc.share_b_faster);
  json regs = json::object();
  for (const auto& [fam, r] : c.regression_by_family) {
    v.text += fmt::format("  {} speedup regression (R^2 {:.2f}):", fam, r.r2);
    for (const auto& t : ranked_params(r)) {
      const size_t i = size_t(std::find(r.terms.begin(), r.terms.end(), t) - r.terms.begin());
      v.text += fmt::format(" {} {:+.3f}", t, r.weights[i]);
      regs[fam][t] = r.weights[i];
    }
    v.text += "\n";
  }
  if (!c.flips.empty()) {
    v.text += fmt::format("  winner flips on {} configs, clearest first:\n", c.flips.size());
    for (size_t i = 0; i < c.flips.size() && i < 10; ++i)
      v.text += fmt::format("    {:.3f}x  {}\n", c.flips[i].speedup, c.flips[i].config);
  }
  if (!c.unstable.empty()) {
    v.text += fmt::format(
        "  UNSTABLE: {} of the matched configs rest on a run whose processes disagree beyond "
        "their CIs:\n",
        c.unstable.size());
    for (size_t i = 0; i < c.unstable.size() && i < 10; ++i)
      v.text += fmt::format("    {}\n", c.unstable[i]);
  }
  v.rows = json::array();
  for (const auto& m : s.matched)
    v.rows.push_back({{"config", m.config},
                      {"a", m.a},
                      {"b", m.b},
                      {"speedup", m.speedup},
                      {"unstable", std::find(c.unstable.begin(), c.unstable.end(), m.config) !=
                                       c.unstable.end()}});
  json flips = json::array();
  for (const auto& f : c.flips) flips.push_back({{"config", f.config}, {"speedup", f.speedup}});
  json fams = json::object();
  for (const auto& [fam, fc] : c.by_family)
    fams[fam] = {{"matched", fc.matched.size()},
                 {"geomean", fc.matched.empty() ? json(nullptr) : json(fc.geomean)},
                 {"share_b_faster", fc.share_b_faster}};
  v.json = {{"axis", c.axis},
            {"a", c.a},
            {"b", c.b},
            {"metric", c.metric},
            {"geomean", s.matched.empty() ? json(nullptr) : json(s.geomean)},
            {"share_b_faster", s.share_b_faster},
            {"only_a", s.only_a},
            {"only_b", s.only_b},
            {"by_family", fams},
            {"regression", regs},
            {"flips", flips},
            {"unstable", c.unstable},
            {"matched", v.rows}};
  return v;
}

View scaling_view(const std::vector<ScalingSeries>& series) {
  View v;
  v.rows = json::array();
  if (series.empty())
    v.text = "no experiment was measured at two or more thread (or worker) counts\n";
  json all = json::array();
  for (const auto& s : series) {
    v.text += s.key + "\n";
    for (const auto& [n, t] : s.throughput) {
      const double u = s.utilization.count(n) ? s.utilization.at(n) : std::nan("");
      // Scaling efficiency: throughput over n times the throughput at 1.
      const double eff = s.throughput.count(1) ? t / (n * s.throughput.at(1)) : std::nan("");
      const double comm = s.comm_share.count(n) ? s.comm_share.at(n) : std::nan("");
      v.text += fmt::format(
          "  {:>3} {:<7}  {:>12.4g} examples/s  {:>8}  speedup {}  efficiency {}{}\n", n, s.param,
          t, std::isfinite(u) ? fmt::format("{:.1f}%", 100 * u) : "-",
          s.throughput.count(1) ? fmt::format("{:.2f}", t / s.throughput.at(1)) : "-",
          std::isfinite(eff) ? fmt::format("{:.0f}%", 100 * eff) : "-",
          std::isfinite(comm) ? fmt::format("  communication {:.0f}%", 100 * comm) : "");
      v.rows.push_back({{"series", s.key},
                        {"config", s.configs.at(n)},
                        {s.param, n},
                        {"examples_per_s", t},
                        {"flops_utilization", nullable(u)},
                        {"scaling_efficiency", nullable(eff)},
                        {"comm_share", nullable(comm)}});
    }
    v.text += !s.amdahl_note.empty() ? "  Amdahl: " + s.amdahl_note + "\n"
              : std::isnan(s.serial_fraction)
                  ? "  Amdahl fit needs a run at 1\n"
                  : fmt::format("  Amdahl non-parallel fraction {:.3f}\n", s.serial_fraction);
    all.push_back({{"series", s.key},
                   {"family", s.family},
                   {"platform", s.platform},
                   {"stack", s.stack},
                   {"serial_fraction", nullable(s.serial_fraction)},
                   {"amdahl_note", s.amdahl_note}});
  }
  v.json = {{"series", all}, {"points", v.rows}};
  return v;
}

View observations_view(const std::vector<Observation>& obs) {
  View v;
  v.rows = json::array();
  for (size_t i = 0; i < obs.size(); ++i) {
    v.text += fmt::format("{:>2}. {}\n", i + 1, obs[i].text);
    v.rows.push_back({{"text", obs[i].text}, {"chart", obs[i].chart}});
  }
  if (obs.empty()) v.text = "no findings: too few measured runs\n";
  v.json = {{"observations", v.rows}};
  return v;
}

json view_document(const std::string& kind, const View& v) {
  json doc = {{"schema_version", 1}, {"context", json(to_json(current_context()))}, {"kind", kind}};
  if (v.json.is_object())
    for (const auto& [k, val] : v.json.items()) doc[k] = val;
  else
    doc["data"] = v.json;
  return doc;
}

std::string rows_csv(const json& rows) {
  std::vector<std::string> cols;
  for (const auto& r : rows)
    for (const auto& [k, val] : r.items())
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
  // ordered_json converts losslessly to the json the shared field writer takes.
  auto cell = [](const json& x) { return csv_field(nlohmann::json(x)); };
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cell(json(cols[i]));
  out += "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < cols.size(); ++i)
      out += (i ? "," : "") + (r.contains(cols[i]) ? cell(r[cols[i]]) : "");
    out += "\n";
  }
  return out;
}

}  // namespace tb
