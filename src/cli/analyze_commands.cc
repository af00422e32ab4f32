#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "analysis/summary.h"
#include "base/errors.h"
#include "base/files.h"
#include "cli/commands.h"
#include "platform/registry.h"
#include "report/analysis_views.h"
#include "report/html_report.h"
#include "spec/printable.h"

namespace tb::cli {
namespace {

std::map<std::string, std::string> parse_fixes(const std::string& text) {
  std::map<std::string, std::string> out;
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string kv = text.substr(pos, comma - pos);
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      throw UsageError("--fix: '" + kv + "' is not key=value");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
    pos = comma + 1;
  }
  return out;
}

int emit(const std::string& kind, const View& v, const std::string& format,
         const std::string& out) {
  std::string text;
  if (format == "json")
    text = view_document(kind, v).dump(2) + "\n";
  else if (format == "csv")
    text = rows_csv(v.rows);
  else
    text = v.text;
  if (out.empty())
    std::cout << text;
  else
    write_file_atomically(out, text);
  return 0;
}

// --format and --out, shared by the analysis views; emit() writes what they choose.
void add_output_options(CLI::App* sub, std::string& format, std::string& out) {
  sub->add_option("--format", format, "text, json or csv")
      ->check(CLI::IsMember({"text", "json", "csv"}))
      ->capture_default_str();
  sub->add_option("-o,--out", out, "file to write (default: standard output)");
}

const FamilyView& family_view(const Summary& s, const std::string& family) {
  if (family.empty() && s.families.size() == 1) return s.families.front();
  if (s.families.empty())
    throw UsageError(
        "the store(s) hold no runs of a family (`sweep` and `suite` record them; "
        "`emulate` results are for `tta`)");
  if (family.empty()) {
    std::string known;
    for (const auto& f : s.families) known += (known.empty() ? "" : ", ") + f.family;
    throw UsageError("the stores hold several families (" + known + "): choose one with --family");
  }
  for (const auto& f : s.families)
    if (f.family == family) return f;
  throw UsageError("no run of family '" + family + "' in the store(s)");
}

}  // namespace

Command add_analyze(CLI::App& app) {
  struct Args {
    std::string view;
    std::vector<std::string> stores;
    std::string family, metric = "flops_utilization", x, y, fix, cells = "auto", format = "text",
                        out, by;
    bool second_order = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "analyze",
      "Analyse a results store: sensitivity, heat map, box plots, roofline, scaling, observations");
  sub->add_option("view", a->view, "sensitivity, heatmap, box, roofline, scaling or observations")
      ->required()
      ->check(
          CLI::IsMember({"sensitivity", "heatmap", "box", "roofline", "scaling", "observations"}));
  sub->add_option("stores", a->stores, "results stores")->required();
  sub->add_option("--family", a->family,
                  "the family to analyse (needed when the stores hold several)");
  sub->add_option("--metric", a->metric,
                  "flops_utilization, examples_per_s, achieved_flops, step_mean_s, ...")
      ->capture_default_str();
  sub->add_option("--x", a->x,
                  "heat map: column hyperparameter (default: largest regression weight)");
  sub->add_option("--y", a->y, "heat map: row hyperparameter (default: second largest weight)");
  sub->add_option("--fix", a->fix,
                  "heat map: hold hyperparameters at values, e.g. nodes=1024,threads=2");
  sub->add_option("--cells", a->cells,
                  "heat map: slice (other hyperparameters held at one combination), median (over "
                  "them, with runs per cell) or auto (median when the runs are not a full grid)")
      ->check(CLI::IsMember({"auto", "slice", "median"}))
      ->capture_default_str();
  sub->add_option("--by", a->by,
                  "box: split each family's box by this hyperparameter (default: cell for rnn, "
                  "block for cnn)");
  sub->add_flag("--second-order", a->second_order, "sensitivity: add pairwise product terms");
  add_output_options(sub, a->format, a->out);
  sub->footer(
      "Examples:\n"
      "  trainbench analyze sensitivity out/demo.db --family fc\n"
      "  trainbench analyze heatmap out/demo.db --family fc --x batch --y nodes --fix layers=4\n"
      "  trainbench analyze heatmap fc.db --x nodes --y batch --cells median  # a sampled sweep\n"
      "  trainbench analyze box out/demo.db --metric examples_per_s --format csv -o box.csv\n"
      "  trainbench analyze box gpt.db --family gpt --by experts --metric mfu\n"
      "  trainbench analyze roofline out/demo.db --format json\n"
      "  trainbench analyze observations out/demo.db");
  return {
      sub, [a, sub]() {
        // An option of another view would be ignored: refused, naming the views it is for.
        for (const auto& [option, views] :
             std::vector<std::pair<std::string, std::vector<std::string>>>{
                 {"--x", {"heatmap"}},
                 {"--y", {"heatmap"}},
                 {"--fix", {"heatmap"}},
                 {"--cells", {"heatmap"}},
                 {"--by", {"box"}},
                 {"--second-order", {"sensitivity"}},
                 {"--metric", {"sensitivity", "heatmap", "box", "observations"}}})
          if (sub->count(option) && std::find(views.begin(), views.end(), a->view) == views.end())
            throw UsageError(fmt::format("{} is an option of analyze {}, not of analyze {}", option,
                                         fmt::join(views, ", "), a->view));
        const RunSet runs = only_family(load_runs(a->stores), a->family);
        SummaryOptions so;
        so.metric = a->metric;
        so.second_order = a->second_order;
        metric_info(a->metric);
        if (a->view == "box") {
          // As below for the regression: a metric no ok run has draws no box, not an empty table.
          size_t ok = 0, with_metric = 0;
          for (const auto& r : runs.runs) {
            ok += r.ok();
            with_metric += r.ok() && std::isfinite(r.metric(a->metric));
          }
          if (ok > 0 && with_metric == 0)
            throw UsageError(fmt::format(
                "none of the {} ok runs has {}{}", ok, a->metric,
                a->metric == "flops_utilization" || a->metric == "mfu"
                    ? " (no platform peak was known when they ran: `trainbench platform` before "
                      "the sweep gives one; or --metric examples_per_s)"
                    : ""));
          return emit("box", box_view(box_groups(runs, a->metric, a->by, a->family), a->metric),
                      a->format, a->out);
        }
        if (a->view == "roofline")
          return emit("roofline", roofline_view(rooflines(runs)), a->format, a->out);
        if (a->view == "scaling") {
          auto series = scaling(runs, "threads");
          for (auto& w : scaling(runs, "workers")) series.push_back(std::move(w));
          return emit("scaling", scaling_view(series), a->format, a->out);
        }
        const Summary s = summarize(runs, so);
        if (a->view == "observations")
          return emit("observations", observations_view(s.observations), a->format, a->out);
        const FamilyView& f = family_view(s, a->family);
        // Runs without the metric (utilization, where no platform peak was known when they
        // ran) make neither a regression nor a heat map: name the metric, not "too few runs".
        size_t with_metric = 0;
        for (const Run* r : runs.of_family(f.family, true))
          with_metric += std::isfinite(r->metric(a->metric));
        const size_t ok = f.by_status.count("ok") ? size_t(f.by_status.at("ok")) : 0;
        if (ok > 0 && with_metric == 0)
          throw UsageError(
              fmt::format("family '{}': none of its {} ok runs has {}{}", f.family, ok, a->metric,
                          a->metric == "flops_utilization" || a->metric == "mfu"
                              ? " (no platform peak was known when they ran: `trainbench platform` "
                                "before the sweep gives one; or --metric examples_per_s)"
                              : ""));
        if (a->view == "sensitivity") {
          if (!f.regression)
            throw UsageError(fmt::format(
                "family '{}' has too few measured runs ({} ok, {} with {}) over {} varying "
                "hyperparameters for a regression",
                f.family, ok, with_metric, a->metric, f.params.size()));
          return emit("sensitivity", sensitivity_view(f.family, *f.regression, a->metric),
                      a->format, a->out);
        }
        std::string x = a->x, y = a->y;
        const auto ranked = f.regression ? ranked_params(*f.regression) : f.params;
        for (const auto& p : ranked) {
          if (x.empty() && p != y)
            x = p;
          else if (y.empty() && p != x)
            y = p;
        }
        if (x.empty() || y.empty())
          throw UsageError("family '" + f.family +
                           "' has fewer than two varying numeric hyperparameters; name the axes "
                           "with --x and --y");
        return emit("heatmap",
                    heat_view(f.family,
                              heat_map(f.points, x, y, parse_fixes(a->fix),
                                       a->cells == "slice"    ? HeatCells::slice
                                       : a->cells == "median" ? HeatCells::median
                                                              : HeatCells::automatic),
                              a->metric),
                    a->format, a->out);
      }};
}

Command add_compare(CLI::App& app) {
  struct Args {
    std::vector<std::string> stores;
    std::string by = "platform", a, b, metric = "examples_per_s", family, format = "text", out;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "compare", "Speedups between two platforms, software stacks or values of a hyperparameter");
  sub->add_option("stores", a->stores, "one or more results stores")->required();
  sub->add_option("--by", a->by, "platform, stack, or a hyperparameter such as dtype or threads")
      ->capture_default_str();
  sub->add_option("--a", a->a, "the baseline side (default: the first value found)");
  sub->add_option("--b", a->b, "the other side (default: the second value found)");
  sub->add_option("--metric", a->metric,
                  "a rate (higher is better) or a time (A's over B's); sizes, counts and spreads "
                  "(params, step_cv) have no speedup")
      ->capture_default_str();
  sub->add_option("--family", a->family, "only this family");
  add_output_options(sub, a->format, a->out);
  sub->footer(
      "Examples:\n"
      "  trainbench compare xeon.db epyc.db --by platform\n"
      "  trainbench compare out/demo.db --by dtype --a fp32 --b bf16\n"
      "  trainbench compare openblas.db blis.db --by stack --format csv -o speedups.csv\n"
      "Speedup = metric of B / metric of A on configs measured on both sides (identical in every "
      "other\n"
      "hyperparameter, platform and stack); configs present on one side only are counted, not "
      "compared.");
  return {sub, [a]() {
            const RunSet runs = only_family(load_runs(a->stores), a->family);
            const auto values = axis_values(runs, a->by);
            if (values.size() < 2 && (a->a.empty() || a->b.empty()))
              throw UsageError(fmt::format("--by {}: the store(s) hold {} value(s) of it, need two",
                                           a->by, values.size()));
            const std::string side_a =
                a->a.empty() ? (values[0] == a->b ? values[1] : values[0]) : a->a;
            std::string side_b = a->b;
            if (side_b.empty())
              for (const auto& v : values)
                if (v != side_a) {
                  side_b = v;
                  break;
                }
            return emit(
                "comparison",
                comparison_view(compare_runs(runs, a->by, side_a, side_b, a->metric, a->family)),
                a->format, a->out);
          }};
}

Command add_report(CLI::App& app) {
  struct Args {
    std::vector<std::string> stores, compare;
    std::string out, metric = "flops_utilization", title = "trainbench report", color = "batch",
                     tta_platform, published;
    bool second_order = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub =
      app.add_subcommand("report", "Write a self-contained HTML report of one or more stores");
  sub->add_option("stores", a->stores, "results stores")->required();
  sub->add_option("-o,--out", a->out, "the HTML file to write")->required();
  sub->add_option("--metric", a->metric, "the metric of heat maps, regressions and box plots")
      ->capture_default_str();
  sub->add_option("--title", a->title, "the report's title")->capture_default_str();
  sub->add_option("--color", a->color, "hyperparameter that colors roofline and comparison points")
      ->capture_default_str();
  sub->add_option("--compare", a->compare,
                  "AXIS:A:B comparisons to draw (default: every axis among platform, stack and "
                  "dtype with two values)");
  sub->add_flag("--second-order", a->second_order, "add pairwise product terms to the regressions");
  sub->add_option("--tta-platform", a->tta_platform,
                  "accelerator of the time-to-accuracy section, for stores with `emulate "
                  "--store` results (default: the platform they ran on)");
  sub->add_option("--published", a->published,
                  "a CSV of published training throughputs to validate the accelerator model "
                  "against (data/published/training-throughput.csv; simulate "
                  "--validate-published)");
  sub->footer(
      "Examples:\n"
      "  trainbench report out/demo.db -o out/report.html\n"
      "  trainbench report out/demo.db -o out/report.html --published "
      "data/published/training-throughput.csv\n"
      "  trainbench report tta.db -o tta.html --tta-platform example-systolic-accelerator\n"
      "  trainbench report xeon.db epyc.db -o cpus.html --compare platform:host-xeon:host-epyc\n"
      "  trainbench report out/demo.db -o util.html --metric examples_per_s --color nodes\n"
      "The file embeds its chart libraries and data: it opens offline in any browser.");
  return {sub, [a, sub]() {
            ReportOptions o;
            o.title = a->title;
            o.tta_platform = a->tta_platform;
            // Checked whether or not the stores hold emulations: a misspelt name is refused
            // the same way on every store.
            if (!a->tta_platform.empty()) find_platform(a->tta_platform);
            o.published = a->published;
            o.summary.metric = a->metric;
            o.summary.second_order = a->second_order;
            o.charts.color_param = a->color;
            o.color_named = sub->count("--color") > 0;
            for (const auto& c : a->compare) {
              const auto p1 = c.find(':'), p2 = c.find(':', p1 == std::string::npos ? p1 : p1 + 1);
              if (p1 == std::string::npos || p2 == std::string::npos || p2 + 1 >= c.size())
                throw UsageError("--compare: '" + c + "' is not AXIS:A:B");
              o.summary.comparisons.push_back(
                  {c.substr(0, p1), c.substr(p1 + 1, p2 - p1 - 1), c.substr(p2 + 1)});
            }
            metric_info(a->metric);
            const ReportStats st = write_report(a->stores, a->out, o);
            std::cout << fmt::format("wrote {} ({:.1f} MB): {} runs, {} charts, {} observations\n",
                                     printable(a->out), double(st.bytes) / 1e6, st.runs, st.charts,
                                     st.observations);
            return 0;
          }};
}

}  // namespace tb::cli
