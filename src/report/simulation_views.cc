#include "report/simulation_views.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/summary.h"
#include "report/html_report.h"

namespace tb {
namespace {

using json = nlohmann::json;

std::string pct(double f) { return fmt::format("{:.1f}%", 100 * f); }

}  // namespace

namespace {

// A predicted-against-observed scatter on log-log axes with the y = x line, for the two
// validations: `rows` carry `x` and `y` fields named by the axes.
struct Axis {
  std::string field, title;
};
void add_prediction_chart(ChartSet& cs, const std::string& table, const std::string& section,
                          const std::string& title, const std::string& caption, json rows,
                          const Axis& x, const Axis& y, const std::string& color,
                          const std::string& shape, const json& tooltip) {
  if (rows.empty()) return;
  double lo = 0, hi = 0;
  for (const auto& r : rows)
    for (const auto& f : {x.field, y.field}) {
      const double t = r.at(f).get<double>();
      lo = lo == 0 ? t : std::min(lo, t);
      hi = std::max(hi, t);
    }
  const std::string line = table + "-line";
  cs.tables[table] = std::move(rows);
  cs.tables[line] = json::array({{{"t", lo / 1.5}}, {{"t", hi * 1.5}}});
  json spec = chart_base(title);
  spec["width"] = 420;
  spec["height"] = 320;
  const json log = {{"type", "log"}};
  auto axis = [&](const Axis& a) {
    return json{{"field", a.field}, {"type", "quantitative"}, {"scale", log}, {"title", a.title}};
  };
  spec["layer"] =
      json::array({{{"data", {{"name", line}}},
                    {"mark", {{"type", "line"}, {"color", "#999"}, {"strokeDash", {4, 4}}}},
                    {"encoding",
                     {{"x", {{"field", "t"}, {"type", "quantitative"}, {"scale", log}}},
                      {"y", {{"field", "t"}, {"type", "quantitative"}, {"scale", log}}}}}},
                   {{"data", {{"name", table}}},
                    {"mark", {{"type", "point"}, {"filled", true}, {"tooltip", true}}},
                    {"encoding",
                     {{"x", axis(x)},
                      {"y", axis(y)},
                      {"color", {{"field", color}, {"type", "nominal"}}},
                      {"shape", {{"field", shape}, {"type", "nominal"}}},
                      {"tooltip", tooltip}}}}});
  cs.charts.push_back({chart_id(table), section, title, caption, {table, line}, table, spec});
}

}  // namespace

void add_validation_chart(ChartSet& cs, const std::vector<sim::Validation>& vs) {
  json rows = json::array();
  for (const auto& v : vs)
    for (const auto& p : v.points)
      rows.push_back({{"platform", v.platform},
                      {"family", p.family},
                      {"config", p.config},
                      {"measured_s", p.measured_s},
                      {"predicted_s", p.predicted_s},
                      {"error", p.error()},
                      {"bound", p.bound}});
  add_prediction_chart(
      cs, "validation", "simulation", "Accelerator model vs measured step times",
      "Each point is a measured run; its prediction comes from the platform's own stored "
      "description (roofline per layer and phase, with its measured efficiency when it has one: "
      "GEMM fraction of peak by size, per-operator overhead). On the dashed line the model is "
      "exact; below it the model is optimistic.",
      std::move(rows), {"measured_s", "measured step time (s)"},
      {"predicted_s", "predicted step time (s)"}, "family", "bound",
      json::array({{{"field", "config"}, {"type", "nominal"}},
                   {{"field", "measured_s"}, {"type", "quantitative"}},
                   {{"field", "predicted_s"}, {"type", "quantitative"}},
                   {{"field", "error"}, {"type", "quantitative"}, {"format", ".1%"}},
                   {{"field", "bound"}, {"type", "nominal"}}}));
}

void add_published_chart(ChartSet& cs, const std::vector<sim::Validation>& vs) {
  json rows = json::array();
  for (const auto& v : vs)
    for (const auto& p : v.points)
      rows.push_back({{"platform", v.platform},
                      {"format", p.format},
                      {"config", p.config},
                      {"source", p.source},
                      {"published", double(p.batch) / p.measured_s},
                      {"predicted", double(p.batch) / p.predicted_s},
                      {"unit", p.unit},
                      {"error", p.error()}});
  add_prediction_chart(
      cs, "published", "published", "Accelerator model vs published training throughputs",
      "Each point is a published single-device training throughput, predicted from the "
      "platform's description in the row's format; above the dashed line the model is "
      "optimistic.",
      std::move(rows), {"published", "published throughput (each row's unit)"},
      {"predicted", "predicted throughput (each row's unit)"}, "platform", "format",
      json::array({{{"field", "config"}, {"type", "nominal"}},
                   {{"field", "published"}, {"type", "quantitative"}},
                   {{"field", "predicted"}, {"type", "quantitative"}},
                   {{"field", "unit"}, {"type", "nominal"}},
                   {{"field", "error"}, {"type", "quantitative"}, {"format", ".1%"}},
                   {{"field", "source"}, {"type", "nominal"}}}));
}

namespace {

// Each point's share of values flushed to zero at every counted step of every seed, and its
// largest scale there: how a recipe's losses and scales move as training goes.
void add_rounding_chart(ChartSet& cs, const TtaResult& r) {
  json rows = json::array();
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    if (!v.source) continue;
    for (const auto& s : v.source->seeds) {
      if (!s.contains("scaling")) continue;
      for (const auto& p : scaling_from_json(s.at("scaling"))) {
        if (!p.values) continue;
        rows.push_back({{"variant", fmt::format("{}. {}", i + 1, v.format)},
                        {"point", p.point},
                        {"series", fmt::format("{}. {}: {}", i + 1, v.format, p.point)},
                        {"seed", s.at("seed")},
                        {"iteration", p.iteration},
                        {"flushed", double(p.underflow) / double(p.values)},
                        {"beyond_range",
                         p.overflow_counted ? json(double(p.overflow) / double(p.values)) : json()},
                        {"scale_max", std::isfinite(p.scale_max) ? json(p.scale_max) : json()}});
      }
    }
  }
  if (rows.empty()) return;
  cs.tables["tta_rounding"] = rows;
  json spec = chart_base("Values flushed to zero per rounding point, at each counted step");
  spec["data"] = {{"name", "tta_rounding"}};
  spec["width"] = 480;
  spec["height"] = 260;
  spec["mark"] = {{"type", "line"}, {"point", true}, {"tooltip", true}, {"opacity", 0.7}};
  spec["encoding"] = {
      {"x", {{"field", "iteration"}, {"type", "quantitative"}, {"title", "iteration"}}},
      {"y",
       {{"field", "flushed"},
        {"type", "quantitative"},
        {"axis", {{"format", ".2%"}}},
        {"title", "share of values flushed to zero"}}},
      {"color", {{"field", "series"}, {"type", "nominal"}, {"title", "variant: point"}}},
      {"detail", {{"field", "seed"}, {"type", "nominal"}}},
      {"tooltip", chart_tooltip({{"variant", "nominal"},
                                 {"point", "nominal"},
                                 {"seed", "nominal"},
                                 {"iteration", "quantitative"},
                                 {"flushed", "quantitative"},
                                 {"beyond_range", "quantitative"},
                                 {"scale_max", "quantitative"}})}};
  cs.charts.push_back({chart_id("tta_rounding"),
                       "tta",
                       "What rounding did during training",
                       "The share of each point's values that its format flushed to zero, on "
                       "each counted step (by default the step before each evaluation; emulate "
                       "--count-every N: every N-th), one line per seed; the tooltip adds the "
                       "share beyond the format's range and the largest scale used.",
                       {"tta_rounding"},
                       "tta_rounding",
                       spec});
}

}  // namespace

void add_tta_chart(ChartSet& cs, const TtaResult& r) {
  // One chart per kind of target: test accuracy (Fashion-MNIST) rises, validation loss (the
  // language task) falls, and the two share no axis.
  for (const std::string metric : {"accuracy", "loss"}) {
    const bool loss = metric == "loss";
    const std::string table = loss ? "tta_loss" : "tta";
    const std::string axis = loss ? "validation loss (nats/byte)" : "test accuracy";
    json rows = json::array();
    for (size_t i = 0; i < r.variants.size(); ++i) {
      const auto& v = r.variants[i];
      if (!v.source || !v.unsupported.empty() || v.metric != metric) continue;  // no step time
      const std::string label = fmt::format("{}. {} ({})", i + 1, v.format, v.model);
      for (const auto& s : v.source->seeds)
        for (const auto& pt : s.at("curve"))
          rows.push_back({{"variant", label},
                          {"policy", v.policy},
                          {"seed", s.at("seed")},
                          {"iteration", pt.at(0)},
                          {metric, pt.at(1)},
                          {"time_s", pt.at(0).get<double>() * v.step_s}});
    }
    if (rows.empty()) continue;
    cs.tables[table] = rows;
    json spec = chart_base((loss ? "Validation loss" : "Test accuracy") +
                           std::string(" vs simulated training time on ") + r.platform);
    spec["data"] = {{"name", table}};
    spec["width"] = 480;
    spec["height"] = 300;
    spec["mark"] = {{"type", "line"}, {"point", true}, {"tooltip", true}, {"opacity", 0.8}};
    json y = {
        {"field", metric}, {"type", "quantitative"}, {"scale", {{"zero", false}}}, {"title", axis}};
    if (loss) y["scale"] = {{"type", "log"}};  // the early losses would flatten the end
    spec["encoding"] = {
        {"x", {{"field", "time_s"}, {"type", "quantitative"}, {"title", "simulated time (s)"}}},
        {"y", y},
        {"color", {{"field", "variant"}, {"type", "nominal"}}},
        {"detail", {{"field", "seed"}, {"type", "nominal"}}},
        {"tooltip", chart_tooltip({{"policy", "nominal"},
                                   {"seed", "nominal"},
                                   {"iteration", "quantitative"},
                                   {metric.c_str(), "quantitative"}})}};
    cs.charts.push_back(
        {chart_id(table),
         "tta",
         loss ? "Time to loss per variant (language task)" : "Time to accuracy per variant",
         std::string(loss ? "Emulated validation-loss" : "Emulated accuracy") +
             " curves (one line per seed) with iterations turned into time by the accelerator "
             "model's step time for the variant's format.",
         {table},
         table,
         spec});
  }
  add_rounding_chart(cs, r);
}

std::string published_table_html(const std::vector<sim::Validation>& vs) {
  std::string h =
      "<table><tr><th>platform</th><th>format</th><th>config</th><th>published</th>"
      "<th>predicted</th><th>per second</th><th>error</th><th>source</th></tr>";
  for (const auto& v : vs)
    for (const auto& p : v.points)
      h += "<tr><td>" + html_escape(v.platform) + "</td><td>" + html_escape(p.format) +
           "</td><td><code>" + html_escape(p.config) + "</code></td><td class=\"num\">" +
           fmt::format("{:.1f}", double(p.batch) / p.measured_s) + "</td><td class=\"num\">" +
           fmt::format("{:.1f}", double(p.batch) / p.predicted_s) + "</td><td>" +
           (p.unit == "tokens/s" ? "tokens" : "examples") + "</td><td class=\"num\">" +
           pct(p.error()) + "</td><td><small>" + html_escape(p.source) + "</small></td></tr>";
  h += "</table>";
  return h + validation_table_html(vs);
}

std::string validation_table_html(const std::vector<sim::Validation>& vs) {
  std::string h =
      "<table><tr><th>platform</th><th>family</th><th>runs</th><th>median |pred-meas|/meas</th>"
      "<th>p90</th><th>median pred/meas</th><th>measured spread</th><th>unstable</th></tr>";
  for (const auto& v : vs) {
    auto row = [&](const std::string& fam, const sim::ErrorStats& s) {
      h += "<tr><td>" + html_escape(v.platform) + "</td><td>" + html_escape(fam) +
           "</td><td class=\"num\">" + std::to_string(s.n) + "</td><td class=\"num\">" +
           pct(s.median) + "</td><td class=\"num\">" + pct(s.p90) + "</td><td class=\"num\">" +
           fmt::format("{:.3f}", s.median_ratio) + "</td><td class=\"num\">" +
           (s.with_spread > 0 ? pct(s.median_spread) : "-") + "</td><td class=\"num\">" +
           std::to_string(s.unstable) + "</td></tr>";
    };
    for (const auto& [f, s] : v.per_family) row(f, s);
    row("all", v.all);
  }
  return h + "</table>";
}

std::string tta_table_html(const TtaResult& r) {
  std::string h =
      "<table><tr><th>#</th><th>variant</th><th>model</th><th>target</th><th>format</th><th>seeds "
      "reached</th><th>iterations (mean &plusmn; sd)</th><th>MLPerf mean</th><th>simulated "
      "step</th><th>TTA</th><th>speedup vs baseline</th></tr>";
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    h += "<tr><td>" + std::to_string(i + 1) + "</td><td><code>" + html_escape(v.policy) +
         "</code>" + (v.baseline ? " (baseline)" : "") + "</td><td>" + html_escape(v.model) +
         "</td><td>" + html_escape(v.target_text()) + "</td><td>" + html_escape(v.format) +
         "</td><td class=\"num\">" + fmt::format("{} of {}", v.reached, v.seeds) + "</td>";
    if (!v.unsupported.empty()) {
      h += "<td colspan=\"5\">unsupported: " + html_escape(v.unsupported) + "</td></tr>";
      continue;
    }
    if (!v.all_reached()) {
      h += "<td colspan=\"2\">not reached</td><td class=\"num\">" +
           fmt::format("{:.4g} ms", v.step_s * 1e3) + "</td><td>not reached</td><td></td></tr>";
      continue;
    }
    h += "<td class=\"num\">" +
         fmt::format("{:.1f} &plusmn; {:.1f}", v.mean_iterations, v.stddev_iterations) +
         "</td><td class=\"num\">" +
         (v.mlperf_iterations ? fmt::format("{:.1f}", *v.mlperf_iterations) : "&ndash;") +
         "</td><td class=\"num\">" + fmt::format("{:.4g} ms", v.step_s * 1e3) +
         "</td><td class=\"num\">" + fmt::format("{:.4g} s", *v.tta_s) + "</td><td class=\"num\">" +
         (v.speedup
              ? fmt::format("{:.2f}x", *v.speedup) +
                    (v.speedup_lo ? fmt::format(" <small>(95% CI {:.2f}&ndash;{:.2f}; "
                                                "more iterations: p = {:.3g})</small>",
                                                *v.speedup_lo, *v.speedup_hi, v.vs_baseline->p_more)
                                  : "") +
                    " <small>(" + html_escape(r.validation) + ")</small>"
              : "&ndash;") +
         "</td></tr>";
  }
  h += "</table>";
  // What each rounding point did, summed over the seeds' counted steps: where a recipe loses
  // values (beyond the format's range, flushed to zero) and the scales it used.
  std::string rows;
  for (size_t i = 0; i < r.variants.size(); ++i)
    for (const auto& p : r.variants[i].rounding) {
      const auto share = [&](uint64_t n) {
        return p.values ? fmt::format("{:.4f}%", 100.0 * double(n) / double(p.values))
                        : std::string("&ndash;");
      };
      const std::string scales =
          p.scale_min == 1 && p.scale_max == 1
              ? "1"
              : fmt::format("{:.4g} &ndash; {:.4g}", p.scale_min, p.scale_max) +
                    (p.sites ? fmt::format(" ({} sites)", p.sites) : "");
      rows += "<tr><td>" + std::to_string(i + 1) + "</td><td>" + html_escape(p.point) +
              "</td><td class=\"num\">" + fmt::format("{:.3g}", double(p.values)) +
              "</td><td class=\"num\">" +
              (p.overflow_counted ? share(p.overflow) : std::string("&ndash;")) +
              "</td><td class=\"num\">" + share(p.underflow) + "</td><td class=\"num\">" +
              std::to_string(p.nonfinite) + "</td><td class=\"num\">" +
              fmt::format("{:.4g}", p.amax) + "</td><td class=\"num\">" + scales + "</td></tr>";
    }
  if (!rows.empty())
    h += "<p>What each rounding point did on the counted steps (by default the last before "
         "each evaluation; emulate --count-every N: every N-th), over every seed; values after "
         "scaling.</p><table><tr><th>#</th>"
         "<th>point</th><th>values</th><th>beyond range</th><th>flushed to 0</th>"
         "<th>NaN/Inf</th><th>max |value|</th><th>scales</th></tr>" +
         rows + "</table>";
  return h;
}

}  // namespace tb
