#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include "analysis/published.h"
#include "base/errors.h"
#include "base/files.h"
#include "platform/registry.h"
#include "record/context.h"
#include "report/run_table.h"
#include "report/simulation_views.h"
#include "report/vega_assets.h"
#include "spec/family.h"

namespace tb {

std::string html_escape(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (char c : t) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string json_for_script(const nlohmann::json& j) {
  // Outside strings JSON has none of these characters, so escaping them everywhere only
  // touches string contents, where \uXXXX means the same character.
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

namespace {

const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f3f73;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:2px 0;opacity:.85;font-size:13px}
nav{padding:8px 32px;background:#e8eef8;font-size:14px} nav a{margin-right:16px;color:#1f3f73}
main{padding:8px 32px 40px;max-width:1500px}
h2{border-bottom:1px solid #ccd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;font-size:13px;margin:8px 0} th,td{border:1px solid #d5d9e0;padding:4px 8px;text-align:left}
th{background:#eef1f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px;word-break:break-all}
.charts{display:flex;flex-wrap:wrap;gap:18px}
figure.chart{background:#fff;border:1px solid #dde;border-radius:6px;padding:10px 14px;margin:0;max-width:100%;overflow-x:auto}
figure.chart figcaption{font-size:12px;color:#555;max-width:620px;margin-top:6px}
a.csv{font-size:12px} ol.obs li{margin:6px 0;line-height:1.4}
#tb-errors:not(:empty){background:#fde8e8;border:1px solid #d33;padding:8px;margin:8px 32px;white-space:pre-wrap}
)css";

// Renders each chart, offers each chart's data as CSV, and reports any failure both on the
// page (#tb-errors) and on the console, where the browser test looks for it.
const char* kScript = R"js(
(function () {
  var errors = document.getElementById('tb-errors');
  function fail(msg) { errors.textContent += msg + '\n'; }
  window.addEventListener('error', function (e) { fail('error: ' + e.message); });
  var P = JSON.parse(document.getElementById('tb-data').textContent);
  var handler = new vegaTooltip.Handler();
  var pending = P.charts.length;
  function finished() { if (--pending === 0) document.body.setAttribute('data-charts-rendered', String(P.charts.length)); }
  P.charts.forEach(function (c) {
    var fig = document.getElementById(c.id);
    var el = fig.querySelector('.vis');
    try {
      var spec = c.spec;
      spec.datasets = {};
      c.tables.forEach(function (t) { spec.datasets[t] = P.tables[t]; });
      var view = new vega.View(vega.parse(vegaLite.compile(spec).spec), {renderer: 'svg', container: el, hover: true});
      view.tooltip(handler.call);
      view.runAsync().then(function () { el.setAttribute('data-rendered', '1'); finished(); })
        .catch(function (e) { fail(c.id + ': ' + e); console.error(c.id, e); finished(); });
    } catch (e) { fail(c.id + ': ' + e); console.error(c.id, e); finished(); }
    fig.querySelector('a.csv').addEventListener('click', function (ev) {
      ev.preventDefault();
      var rows = P.tables[c.csv] || [];
      var cols = [];
      rows.forEach(function (r) { Object.keys(r).forEach(function (k) { if (cols.indexOf(k) < 0) cols.push(k); }); });
      function cell(v) {
        if (v === null || v === undefined) return '';
        var s = String(v);
        return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
      }
      var text = cols.map(cell).join(',') + '\n' +
        rows.map(function (r) { return cols.map(function (k) { return cell(r[k]); }).join(','); }).join('\n') + '\n';
      var a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
      a.download = c.id + '.csv';
      document.body.appendChild(a);
      a.click();
      a.remove();
    });
  });
  if (pending === 0) document.body.setAttribute('data-charts-rendered', '0');
})();
)js";

std::string pct_or_dash(double v) {
  return std::isfinite(v) ? fmt::format("{:.1f}%", 100 * v) : "\u2013";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

void platform_table(std::string& h, const RunSet& runs) {
  h += "<table><tr><th>platform</th><th>kind</th><th>cores</th><th>peak (FLOP/s)</th><th>spec "
       "peak</th>"
       "<th>memory bandwidth</th><th>cache bandwidth</th><th>runs</th><th>source</th></tr>";
  std::map<std::string, size_t> count;
  for (const auto& r : runs.runs) count[r.platform] += 1;
  for (const auto& p : runs.platforms) {
    h += "<tr><td>" + html_escape(p.name) + "</td>";
    if (!p.description) {
      h += "<td colspan=\"6\">" +
           (p.problem.empty()
                ? std::string(
                      "no platform description in the store (run <code>trainbench platform</code> "
                      "before sweeping)")
                : "unreadable platform description: " + html_escape(p.problem)) +
           "</td><td class=\"num\">" + std::to_string(count[p.name]) + "</td><td></td></tr>";
      continue;
    }
    const auto& d = *p.description;
    std::string peaks, spec, caches;
    for (const auto& [dt, tf] : d.peak_tflops)
      peaks += html_escape(dt) + " " + si(tf * 1e12, "FLOP/s") + "<br>";
    if (d.extra.contains("spec_peak_tflops") && d.extra["spec_peak_tflops"].is_object())
      for (const auto& [dt, tf] : d.extra["spec_peak_tflops"].items())
        if (tf.is_number())
          spec += html_escape(dt) + " " + si(tf.get<double>() * 1e12, "FLOP/s") + "<br>";
    for (const auto& [lvl, g] : d.cache_bandwidth_gbps)
      caches += html_escape(lvl) + " " + si(g * 1e9, "B/s") + "<br>";
    h += "<td>" + html_escape(d.kind) + "</td><td class=\"num\">" +
         (d.cores ? std::to_string(d.cores) : "") + "</td><td>" + peaks + "</td><td>" + spec +
         "</td><td>" + (d.memory_bandwidth_gbps > 0 ? si(d.bandwidth(), "B/s") : "") + "</td><td>" +
         caches + "</td><td class=\"num\">" + std::to_string(count[p.name]) + "</td><td>" +
         html_escape(d.source) + "</td></tr>";
  }
  h += "</table>";
}

void status_table(std::string& h, const Summary& s) {
  std::set<std::string> statuses;
  for (const auto& f : s.families)
    for (const auto& [st, n] : f.by_status) statuses.insert(st);
  h += "<table><tr><th>family</th>";
  for (const auto& st : statuses) h += "<th>" + html_escape(st) + "</th>";
  h += "<th>median " + html_escape(metric_info(s.metric).label) +
       "</th><th>regression R\u00b2</th></tr>";
  for (const auto& f : s.families) {
    h += "<tr><td>" + html_escape(f.family) + "</td>";
    for (const auto& st : statuses)
      h += "<td class=\"num\">" + std::to_string(f.by_status.count(st) ? f.by_status.at(st) : 0) +
           "</td>";
    std::vector<double> v;
    for (const auto& p : f.points)
      if (p.value) v.push_back(*p.value);
    const double med = v.empty() ? std::nan("") : percentile(v, 50);
    const MetricInfo& m = metric_info(s.metric);
    h += "<td class=\"num\">" +
         (v.empty()                          ? std::string("\u2013")
          : m.unit.rfind("fraction", 0) == 0 ? pct_or_dash(med)
                                             : fmt::format("{:.4g}", med)) +
         "</td><td class=\"num\">" +
         (f.regression ? fmt::format("{:.3f}", f.regression->r2) : "\u2013") + "</td></tr>";
  }
  h += "</table>";
}

// TBD Table III's measurements per reference model and batch: throughput in the model's
// own unit, FLOPS and CPU utilization, step time.
void reference_table(std::string& h, const RunSet& runs) {
  h += "<table><tr><th>model</th><th>task</th><th>batch</th><th>throughput</th><th>FLOPS "
       "utilization</th><th>CPU utilization</th><th>step time</th><th>platform</th><th>status</th>"
       "<th>config</th></tr>";
  for (const Run* r : reference_runs(runs, /*ok_only=*/false)) {
    const FamilySchema* schema = find_family_schema(r->family);
    const auto batch = r->number("batch");
    const double thr = r->throughput();
    const double step = r->metric("step_mean_s");
    h += "<tr><td>" + html_escape(r->family) + "</td><td>" +
         html_escape(schema ? schema->task : "") + "</td><td class=\"num\">" +
         (batch ? fmt::format("{:g}", *batch) : "") + "</td><td class=\"num\">" +
         (r->ok() && std::isfinite(thr)
              ? fmt::format("{:.4g} {}/s", thr, html_escape(r->throughput_unit))
              : "\u2013") +
         "</td><td class=\"num\">" + pct_or_dash(r->metric("flops_utilization")) +
         "</td><td class=\"num\">" + pct_or_dash(r->metric("cpu_utilization")) +
         "</td><td class=\"num\">" +
         (std::isfinite(step) ? fmt::format("{:.4g} ms", 1e3 * step) : "\u2013") + "</td><td>" +
         html_escape(r->platform) + "</td><td>" + html_escape(r->status) +
         (r->error.empty() ? "" : ": " + html_escape(r->error)) + "</td><td><code>" +
         html_escape(r->config) + "</code></td></tr>";
  }
  h += "</table>";
}

void figure(std::string& h, const Chart& c) {
  h += "<figure class=\"chart\" id=\"" + html_escape(c.id) +
       "\"><div class=\"vis\"></div><figcaption>" + html_escape(c.caption) +
       " <a class=\"csv\" href=\"#\">Download data (CSV)</a></figcaption></figure>";
}

void section(std::string& h, const ChartSet& cs, const std::string& name) {
  h += "<div class=\"charts\">";
  for (const auto& c : cs.charts)
    if (c.section == name) figure(h, c);
  h += "</div>";
}

}  // namespace

std::string render_report(const RunSet& runs, const Summary& s, const ChartSet& cs,
                          const ReportOptions& o, const SimulationSections& sim) {
  const Context ctx = current_context();
  std::string h;
  h.reserve(2 << 20);
  h += "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
       html_escape(o.title) +
       "</title><meta name=\"viewport\" content=\"width=device-width\"><style>" + kStyle +
       "</style></head><body>";
  std::string stores;
  for (const auto& st : runs.stores) stores += (stores.empty() ? "" : ", ") + html_escape(st);
  size_t ok = 0;
  for (const auto& r : runs.runs) ok += r.ok();
  h += "<header><h1>" + html_escape(o.title) + "</h1><p>" + std::to_string(runs.runs.size()) +
       " runs (" + std::to_string(ok) + " measured) from " + stores + "</p><p>Generated " +
       utc_now() + " by trainbench " + html_escape(trainbench_version_string()) + " on " +
       html_escape(ctx.host.hostname) + "; metric: " + html_escape(metric_info(s.metric).label) +
       "</p></header>";
  std::set<std::string> sections;
  for (const auto& c : cs.charts) sections.insert(c.section);
  h += "<nav><a href=\"#observations\">Observations</a><a href=\"#platforms\">Platforms</a>";
  for (const auto& [id, label] :
       std::vector<std::pair<std::string, std::string>>{{"reference", "Reference models"},
                                                        {"families", "Families"},
                                                        {"distributions", "Distributions"},
                                                        {"rooflines", "Rooflines"},
                                                        {"profiles", "Profiles"},
                                                        {"stacks", "Software stacks"},
                                                        {"comparisons", "Comparisons"},
                                                        {"scaling", "Scaling"},
                                                        {"simulation", "Simulation"},
                                                        {"published", "Published"},
                                                        {"tta", "Time to accuracy"}})
    if (sections.count(id)) h += "<a href=\"#" + id + "\">" + label + "</a>";
  h += "</nav><div id=\"tb-errors\"></div><main>";

  h += "<h2 id=\"observations\">Observations</h2>";
  if (s.observations.empty()) h += "<p>No findings: the stores hold too few measured runs.</p>";
  h += "<ol class=\"obs\">";
  for (const auto& ob : s.observations)
    h += "<li>" + html_escape(ob.text) + " <a href=\"#" + html_escape(ob.chart) +
         "\">[chart]</a></li>";
  h += "</ol>";

  h += "<h2 id=\"platforms\">Platforms</h2>";
  platform_table(h, runs);
  std::set<std::string> stacks;
  for (const auto& r : runs.runs) stacks.insert(r.stack);
  h += "<p>Software stacks: ";
  for (const auto& st : stacks) h += "<code>" + html_escape(st) + "</code> ";
  h += "</p>";
  status_table(h, s);

  if (sections.count("reference")) {
    h += "<h2 id=\"reference\">Reference models</h2><p>The real-model suite (<code>trainbench "
         "suite</code>, docs/suite.md) beside the generated families: stars in the charts.</p>";
    reference_table(h, runs);
    section(h, cs, "reference");
  }
  if (sections.count("families")) {
    h += "<h2 id=\"families\">Families: sensitivity and heat maps</h2>";
    section(h, cs, "families");
  }
  if (sections.count("distributions")) {
    h += "<h2 id=\"distributions\">Distributions</h2>";
    section(h, cs, "distributions");
  }
  if (sections.count("rooflines")) {
    h += "<h2 id=\"rooflines\">Rooflines</h2>";
    section(h, cs, "rooflines");
  }
  if (sections.count("profiles")) {
    h += "<h2 id=\"profiles\">Operator profiles and memory</h2>";
    section(h, cs, "profiles");
  }
  for (const auto& [id, title] : std::vector<std::pair<std::string, std::string>>{
           {"stacks", "Software stacks: speedups over the baseline stack"},
           {"comparisons", "Comparisons"}}) {
    if (!sections.count(id)) continue;
    h += "<h2 id=\"" + id + "\">" + title + "</h2>";
    section(h, cs, id);
    for (const auto& c : s.comparisons) {
      if (c.flips.empty() || comparison_section(c.axis) != id) continue;
      h += "<h3>" + html_escape(c.axis) + " " + html_escape(c.b) + " vs " + html_escape(c.a) +
           ": configs where the winner flips (" + std::to_string(c.flips.size()) +
           ")</h3><table><tr><th>config</th><th>" + html_escape(c.a) + "</th><th>" +
           html_escape(c.b) + "</th><th>speedup</th></tr>";
      for (size_t i = 0; i < c.flips.size() && i < 20; ++i)
        h += "<tr><td><code>" + html_escape(c.flips[i].config) + "</code></td><td class=\"num\">" +
             fmt::format("{:.4g}", c.flips[i].a) + "</td><td class=\"num\">" +
             fmt::format("{:.4g}", c.flips[i].b) + "</td><td class=\"num\">" +
             fmt::format("{:.3f}", c.flips[i].speedup) + "</td></tr>";
      h += "</table>";
    }
  }
  if (sections.count("scaling")) {
    h += "<h2 id=\"scaling\">Scaling</h2>";
    section(h, cs, "scaling");
    h += "<table><tr><th>experiment</th><th>counts</th><th>Amdahl non-parallel fraction</th></tr>";
    for (const auto& sc : s.scaling) {
      std::string counts;
      for (const auto& [n, t] : sc.throughput)
        counts += (counts.empty() ? "" : ", ") + std::to_string(n);
      h += "<tr><td><code>" + html_escape(sc.key) + "</code></td><td>" + counts +
           "</td><td class=\"num\">" +
           (!sc.amdahl_note.empty()          ? html_escape(sc.amdahl_note)
            : std::isnan(sc.serial_fraction) ? std::string("\u2013")
                                             : fmt::format("{:.3f}", sc.serial_fraction)) +
           "</td></tr>";
    }
    h += "</table>";
  }
  if (sections.count("simulation")) {
    h += "<h2 id=\"simulation\">Simulation: the accelerator model against measured runs</h2>";
    section(h, cs, "simulation");
    h += "<p>Relative error of the predicted step time, |predicted - measured| / measured, over "
         "the ok runs of each platform with a stored description (docs/numerics.md).</p>";
    h += sim.validation_html;
  }
  if (sections.count("published")) {
    h += "<h2 id=\"published\">Simulation: the accelerator model against published training "
         "throughputs</h2>";
    section(h, cs, "published");
    h += "<p>Published single-device training throughputs, each predicted from its platform's "
         "description in the row's format (simulate --validate-published; docs/numerics.md). "
         "Error is |predicted - published| / published step time.</p>";
    h += sim.published_html;
  }
  if (sections.count("tta")) {
    h += "<h2 id=\"tta\">Time to accuracy on " + html_escape(sim.tta_platform) + "</h2>";
    section(h, cs, "tta");
    h += "<p>Emulated iterations to the target (a test accuracy on Fashion-MNIST, a validation "
         "loss on the language task) times the simulated step time at the variant's format; a "
         "variant whose seeds did not all reach the target has no number.</p>";
    h += sim.tta_html;
  }
  h += "<p style=\"font-size:12px;color:#666\">Charts: " + html_escape(vega_assets().versions) +
       " (inlined). FLOPs are 2 x multiply-accumulates; see docs/cost-model.md.</p></main>";

  nlohmann::json payload = {
      {"schema_version", 1}, {"tables", cs.tables}, {"charts", nlohmann::json::array()}};
  for (const auto& c : cs.charts)
    payload["charts"].push_back(
        {{"id", c.id}, {"spec", c.spec}, {"tables", c.tables}, {"csv", c.csv_table}});
  h += "<script type=\"application/json\" id=\"tb-data\">" + json_for_script(payload) + "</script>";
  const auto& a = vega_assets();
  // Installed first, so that anything the chart libraries complain about shows on the page.
  h += "<script>(function(){var box=document.getElementById('tb-errors');"
       "['error','warn'].forEach(function(k){var f=console[k];console[k]=function(){"
       "box.textContent+=k+': '+Array.prototype.map.call(arguments,String).join(' ')+'\\n';"
       "return f.apply(console,arguments);};});})();</script>";
  h += "<script>";
  h += a.vega;
  h += "</script><script>";
  h += a.vega_lite;
  // vega-tooltip's browser build looks for vega-util under this global name; vega exports it.
  h += "</script><script>window.vegaUtil = window.vega;</script><script>";
  h += a.vega_tooltip;
  h += "</script><script>";
  h += kScript;
  h += "</script></body></html>\n";
  return h;
}

ReportStats write_report(const std::vector<std::string>& stores, const std::string& out,
                         const ReportOptions& o) {
  const RunSet runs = load_runs(stores);
  if (o.color_named && std::none_of(runs.runs.begin(), runs.runs.end(), [&](const Run& r) {
        return r.params.count(o.charts.color_param);
      }))
    throw UsageError("--color '" + o.charts.color_param + "': no run has that hyperparameter");
  const Summary s = summarize(runs, o.summary);
  ChartSet cs = build_charts(runs, s, o.charts);
  SimulationSections extra;
  std::vector<sim::Validation> validations;
  for (auto& v : sim::validate(runs))
    if (!v.points.empty()) validations.push_back(std::move(v));
  if (!validations.empty()) {
    add_validation_chart(cs, validations);
    extra.validation_html = validation_table_html(validations);
  }
  if (!o.published.empty()) {
    const auto published = sim::validate_published(sim::read_published(o.published));
    add_published_chart(cs, published);
    extra.published_html = published_table_html(published);
  }
  const auto emulations = load_emulations(stores);
  if (!emulations.empty()) {
    std::optional<PlatformDescription> accel;
    if (!o.tta_platform.empty()) {
      accel = find_platform(o.tta_platform);
    } else {
      for (const auto& info : runs.platforms)
        if (info.name == emulations.front().platform && info.description) accel = info.description;
    }
    if (accel) {
      const TtaResult tta = time_to_accuracy(emulations, *accel);
      add_tta_chart(cs, tta);
      extra.tta_html = tta_table_html(tta);
      extra.tta_platform = accel->name;
    }
  }
  const std::string html = render_report(runs, s, cs, o, extra);
  write_file_atomically(out, html);
  return {runs.runs.size(), cs.charts.size(), s.observations.size(), html.size()};
}

}  // namespace tb
