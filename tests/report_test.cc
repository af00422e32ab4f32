// Analyses over a store and the HTML report built from them: the known law of a
// synthetic store is recovered, failed configs stay visible, data text is escaped.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "analysis/summary.h"
#include "base/errors.h"
#include "report/analysis_views.h"
#include "report/html_report.h"
#include "report/run_table.h"
#include "support/files.h"
#include "support/synthetic_store.h"

namespace tb {
namespace {

std::string synthetic_store(const std::string& name, size_t runs) {
  const std::string path =
      ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  auto store = Store::open(path);
  testing::SyntheticOptions o;
  o.runs = runs;
  testing::fill_synthetic_store(*store, o);
  return path;
}

const FamilyView& fc_of(const Summary& s) {
  for (const auto& f : s.families)
    if (f.family == "fc") return f;
  throw std::runtime_error("no fc");
}

// A run of one timed step has no confidence interval: the table says so instead of "+-inf%".
TEST(Report, ARunOfOneSampleStatesItHasNoInterval) {
  RunResult r;
  r.status = Status::kOk;
  r.steps.samples = 1;
  r.steps.mean = r.steps.median = 0.25;
  r.steps.ci = {0.25, std::numeric_limits<double>::infinity(), 1};
  const std::string one = format_result(r);
  EXPECT_NE(one.find("(one sample: no CI)"), std::string::npos) << one;
  EXPECT_EQ(one.find("inf"), std::string::npos) << one;
  r.steps.samples = 50;
  r.steps.ci.half_width = 0.005;
  EXPECT_NE(format_result(r).find("+-2.00% (95% CI)"), std::string::npos) << format_result(r);
}

// Utilization stays against the whole peak; a CPU run on fewer threads than the cores that
// peak counts is also put against its threads' share (1 of 4 cores: 4x), and only then.
TEST(Report, AFewThreadsRunIsAlsoPutAgainstItsThreadsShareOfThePeak) {
  RunResult r;
  r.status = Status::kOk;
  r.device = "cpu";
  r.steps.samples = 50;
  r.steps.mean = r.steps.median = 0.25;
  r.steps.ci = {0.25, 0.001, 50};
  r.achieved_flops = 1e9;
  r.peak_flops = 10e9;
  r.flops_utilization = 0.1;
  r.threads = 1;
  r.peak_cores = 4;
  EXPECT_NE(format_result(r).find(
                "10.0% of the 10 GFLOP/s peak (40.0% of its 1 thread's share, 1 of 4 cores)"),
            std::string::npos)
      << format_result(r);
  r.threads = 2;
  EXPECT_NE(format_result(r).find("(20.0% of its 2 threads' share, 2 of 4 cores)"),
            std::string::npos)
      << format_result(r);
  for (const auto& [threads, cores, device] :
       std::vector<std::tuple<int, std::optional<int>, std::string>>{
           {4, 4, "cpu"}, {1, std::nullopt, "cpu"}, {1, 4, "cuda:0"}}) {
    r.threads = threads;
    r.peak_cores = cores;
    r.device = device;
    EXPECT_EQ(format_result(r).find("share"), std::string::npos) << format_result(r);
  }
}

TEST(Report, AnalysesRecoverTheSyntheticLaw) {
  const RunSet runs = load_runs({synthetic_store("law", 250)});
  ASSERT_EQ(runs.platforms.size(), 2u);
  ASSERT_TRUE(runs.platforms[0].description.has_value());
  // Regress on the slow platform only, where the law holds exactly (plus noise).
  RunSet slow = runs;
  slow.runs.erase(std::remove_if(slow.runs.begin(), slow.runs.end(),
                                 [](const tb::Run& r) { return r.platform != "slow"; }),
                  slow.runs.end());
  const Summary s = summarize(slow);
  const FamilyView& f = fc_of(s);
  ASSERT_TRUE(f.regression.has_value());
  const Regression& r = *f.regression;
  std::map<std::string, double> w;
  for (size_t i = 0; i < r.log2_scaled.size(); ++i) w[r.terms[i]] = r.weights[i];
  // oom-predicted runs are left out of the fit, which shifts the standardization a little;
  // the ordering and signs of the law must survive, and the magnitudes roughly.
  EXPECT_GT(w["batch"], 0.05);
  EXPECT_GT(w["nodes"], 0.02);
  EXPECT_LT(w["layers"], -0.01);
  EXPECT_GT(std::abs(w["batch"]), std::abs(w["nodes"]));
  EXPECT_GT(r.r2, 0.9);
  // Heat map over the two largest weights, failures visible as cells with their status.
  ASSERT_TRUE(f.heat.has_value());
  EXPECT_EQ(f.heat->x, "batch");
  EXPECT_EQ(f.heat->y, "nodes");
  EXPECT_EQ(f.heat->cells.size(), f.heat->xs.size() * f.heat->ys.size());
  size_t oom = 0;
  for (const auto& c : f.heat->cells)
    if (c.status == "oom-predicted") {
      ++oom;
      EXPECT_FALSE(c.value.has_value());
      EXPECT_NE(c.error.find("exceeds"), std::string::npos);
      EXPECT_GT(c.x * c.y, double(1 << 22));
    }
  EXPECT_GT(oom, 0u);
}

TEST(Report, PlatformComparisonMatchesConfigsAndFindsFlips) {
  const RunSet runs = load_runs({synthetic_store("cmp", 250)});
  const auto platforms = axis_values(runs, "platform");
  ASSERT_EQ(platforms.size(), 2u);
  const ComparisonView c = compare_runs(runs, "platform", platforms[0], platforms[1]);
  ASSERT_FALSE(c.points.empty());
  size_t ok_slow = 0;
  for (const auto& r : runs.runs) ok_slow += r.ok() && r.platform == "slow";
  EXPECT_EQ(c.stats.matched.size(), ok_slow);  // every ok config ran on both
  for (const auto& m : c.stats.matched) {
    const auto p = config_params(m.config);
    const double expect = std::stod(p.at("batch")) >= 1024 ? 1.5 : 0.8;
    EXPECT_NEAR(m.speedup, expect, 0.15) << m.config;
  }
  ASSERT_FALSE(c.flips.empty());
  for (const auto& f : c.flips) EXPECT_EQ((f.speedup > 1), !(c.stats.geomean > 1)) << f.config;
  ASSERT_TRUE(c.regression_by_family.count("fc"));
  EXPECT_EQ(ranked_params(c.regression_by_family.at("fc")).front(), "batch");
  EXPECT_THROW(compare_runs(runs, "platform", "slow", "nonexistent"), UsageError);
  // On a time, each side keeps the stored value (seconds, not their inverses), and the speedup
  // is still how much faster B is: a / b.
  const ComparisonView t =
      compare_runs(runs, "platform", platforms[0], platforms[1], "step_mean_s");
  ASSERT_EQ(t.stats.matched.size(), c.stats.matched.size());
  for (const auto& m : t.stats.matched) {
    const ::tb::Run* a = nullptr;
    for (const auto& r : runs.runs)
      if (r.config == m.config && r.platform == platforms[0]) a = &r;
    ASSERT_NE(a, nullptr) << m.config;
    EXPECT_DOUBLE_EQ(m.a, a->metric("step_mean_s")) << m.config;
    EXPECT_NEAR(m.speedup, m.a / m.b, 1e-12 * m.speedup) << m.config;
  }
  // A size or a spread has no speedup.
  for (const char* none : {"params", "step_cv", "flops_per_step"})
    EXPECT_THROW(compare_runs(runs, "platform", platforms[0], platforms[1], none), UsageError)
        << none;
}

TEST(Report, HeatMapFixesAndRefusesBadAxes) {
  const RunSet runs = load_runs({synthetic_store("heat", 250)});
  const auto pts = points_of(runs.of_family("fc", false), "flops_utilization");
  const HeatMap h = heat_map(pts, "batch", "layers", {{"nodes", "64"}});
  EXPECT_EQ(h.fixed.at("nodes"), "64");
  EXPECT_THROW(heat_map(pts, "batch", "dtype"), UsageError);
  EXPECT_THROW(heat_map(pts, "batch", "batch"), UsageError);
  EXPECT_THROW(heat_map(pts, "batch", "layers", {{"nodes", "3"}}), UsageError);
}

Point pt(int nodes, int batch, int layers, std::optional<double> value,
         const std::string& status = "ok") {
  Point p;
  p.config = fmt::format("fc:layers={},nodes={},batch={}", layers, nodes, batch);
  p.family = "fc";
  p.status = status;
  p.params = {{"nodes", std::to_string(nodes)},
              {"batch", std::to_string(batch)},
              {"layers", std::to_string(layers)}};
  p.value = value;
  return p;
}

TEST(Report, ASampledSweepsHeatMapIsTheMedianOverTheOtherHyperparameters) {
  // A sample: each (nodes, batch) cell was reached at other layer counts, no slice is full.
  std::vector<Point> pts = {pt(64, 8, 1, 1.0),
                            pt(64, 8, 2, 3.0),
                            pt(64, 8, 3, 2.0),
                            pt(64, 16, 4, 5.0),
                            pt(64, 16, 5, 7.0),
                            pt(128, 8, 6, 4.0),
                            pt(128, 16, 7, std::nullopt, "oom"),
                            pt(128, 16, 8, std::nullopt, "oom"),
                            pt(128, 16, 9, std::nullopt, "timeout")};
  const HeatMap slice = heat_map(pts, "nodes", "batch", {}, HeatCells::slice);
  EXPECT_FALSE(slice.aggregated);
  size_t slice_values = 0;
  for (const auto& c : slice.cells) slice_values += c.value.has_value();
  EXPECT_EQ(slice_values, 1u);  // one layer count holds only one of the three reached cells

  const HeatMap h = heat_map(pts, "nodes", "batch");  // automatic: no slice fills half
  ASSERT_TRUE(h.aggregated);
  EXPECT_TRUE(h.fixed.empty());
  auto cell = [&](double x, double y) {
    for (const auto& c : h.cells)
      if (c.x == x && c.y == y) return c;
    throw std::runtime_error("no cell");
  };
  EXPECT_EQ(*cell(64, 8).value, 2.0);  // median of 1, 3, 2
  EXPECT_EQ(cell(64, 8).runs, 3);
  EXPECT_EQ(*cell(64, 16).value, 6.0);  // median of 5, 7
  EXPECT_EQ(cell(128, 8).runs, 1);
  EXPECT_EQ(cell(128, 8).config, "fc:layers=6,nodes=128,batch=8");
  EXPECT_FALSE(cell(128, 16).value);
  EXPECT_EQ(cell(128, 16).status, "oom");  // what most of its runs ended as
  EXPECT_EQ(cell(128, 16).runs, 0);

  const View v = heat_view("fc", h, "flops_utilization");
  EXPECT_NE(v.text.find("aggregated over the other hyperparameters"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("runs per cell"), std::string::npos) << v.text;
  EXPECT_TRUE(v.json["aggregated"].get<bool>());

  // A full grid keeps ParaDnn's slice.
  std::vector<Point> grid;
  for (int n : {64, 128})
    for (int b : {8, 16})
      for (int l : {1, 2}) grid.push_back(pt(n, b, l, double(n + b + l)));
  EXPECT_FALSE(heat_map(grid, "nodes", "batch").aggregated);
  EXPECT_TRUE(heat_map(grid, "nodes", "batch", {}, HeatCells::median).aggregated);
}

TEST(Report, HtmlIsSelfContainedAndEscapesDataText) {
  const std::string store = synthetic_store("html", 250);
  const std::string out = ::testing::TempDir() + "/report-" + std::to_string(getpid()) + ".html";
  const ReportStats st = write_report({store}, out, {});
  const std::string html = ::tb::testing::read_text(out);
  EXPECT_EQ(st.bytes, html.size());
  EXPECT_GE(st.charts, 5u);
  // One figure per chart, every chart's spec in the payload.
  const std::regex fig("<figure class=\"chart\" id=\"");
  EXPECT_EQ(size_t(std::distance(std::sregex_iterator(html.begin(), html.end(), fig),
                                 std::sregex_iterator())),
            st.charts);
  // The hostile text from the store appears only escaped: as HTML entities in tables,
  // as \u003c in the JSON payload; the only </script> tags are the page's own.
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert"), std::string::npos);
  EXPECT_NE(html.find("\\u003cscript\\u003ealert"), std::string::npos);
  size_t closes = 0;
  for (size_t p = html.find("</script>"); p != std::string::npos; p = html.find("</script>", p + 1))
    ++closes;
  EXPECT_EQ(closes, 7u);  // data, console hook, vega, vega-lite, vegaUtil alias, tooltip, page
  // Offline: no external resource is referenced.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("Observations"), std::string::npos);
  EXPECT_GE(st.observations, 3u);
}

TEST(Report, BoxesSplitByAnyHyperparameter) {
  const RunSet runs = load_runs({synthetic_store("views", 100)});
  const auto by_layers = box_groups(runs, "flops_utilization", "layers", "fc");
  ASSERT_GT(by_layers.size(), 1u);
  size_t n = 0;
  for (const auto& g : by_layers) {
    EXPECT_EQ(g.group.rfind("fc layers=", 0), 0u) << g.group;
    n += g.stats.n;
  }
  // In the order of the value, as numbers: nodes=1024 after nodes=64 (its text sorts before).
  double last = 0;
  const auto by_nodes = box_groups(runs, "flops_utilization", "nodes", "fc");
  ASSERT_GT(by_nodes.size(), 2u);
  for (const auto& g : by_nodes) {
    const double nodes = std::stod(g.group.substr(g.group.find('=') + 1));
    EXPECT_GT(nodes, last) << g.group;
    last = nodes;
  }
  const auto whole = box_groups(runs, "flops_utilization", "", "fc");
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(n, whole[0].stats.n);  // every run in exactly one split box
  EXPECT_THROW(box_groups(runs, "flops_utilization", "nope"), UsageError);
}

TEST(Report, ViewsRenderAsCsvAndJson) {
  const RunSet runs = load_runs({synthetic_store("views", 100)});
  const View b = box_view(box_groups(runs, "flops_utilization"), "flops_utilization");
  const std::string csv = rows_csv(b.rows);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "group,n,p2,p9,p50,p91,p98,outliers");
  const auto doc = view_document("box", b);
  EXPECT_EQ(doc.at("schema_version"), 1);
  EXPECT_TRUE(doc.at("context").contains("host"));
  EXPECT_EQ(rows_csv(nlohmann::json::array({{{"a", "x,\"y\""}}})), "a\n\"x,\"\"y\"\"\"\n");
}

TEST(Report, ReferenceModelsAreStarsWithTheirOwnSection) {
  const std::string path = ::testing::TempDir() + "/refs-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  {
    auto store = Store::open(path);
    testing::SyntheticOptions o;
    o.runs = 60;
    o.reference = true;
    testing::fill_synthetic_store(*store, o);
  }
  EXPECT_TRUE(is_reference_family(testing::kFakeReference));
  EXPECT_FALSE(is_reference_family("fc"));
  EXPECT_FALSE(is_reference_family("a_family_of_another_build"));  // unknown: generated
  const RunSet runs = load_runs({path});
  ASSERT_EQ(reference_runs(runs, true).size(), 6u);  // 3 batches x 2 platforms
  EXPECT_EQ(reference_runs(runs, true).front()->throughput_unit, "images");
  const Summary s = summarize(runs);
  const ChartSet cs = build_charts(runs, s);
  std::set<std::string> ids;
  size_t stars = 0;
  for (const auto& c : cs.charts) {
    ids.insert(c.id);
    const std::string spec = c.spec.dump();
    if (spec.find("L0.2245,-0.309") != std::string::npos) {  // the star's SVG path
      ++stars;
      EXPECT_NE(spec.find("datum.reference"), std::string::npos) << c.id;
    }
    if (c.id == chart_id("refthroughput") || c.id == chart_id("refutil") ||
        c.id == chart_id("refscatter"))
      EXPECT_EQ(c.section, "reference");
  }
  EXPECT_TRUE(ids.count(chart_id("refthroughput")) && ids.count(chart_id("refutil")) &&
              ids.count(chart_id("refscatter")));
  EXPECT_GE(stars, 3u);  // the model-size scatter (2 panels) and a roofline per platform
  // Throughput in the model's own unit: two images per example in the fake model.
  const auto& thr = cs.tables["ref-throughput"];
  ASSERT_EQ(thr.size(), 6u);
  for (const auto& r : runs.runs)
    if (r.family == testing::kFakeReference) {
      bool found = false;
      for (const auto& row : thr)
        found |= row["config"] == r.config && row["platform"] == r.platform &&
                 std::abs(row["throughput"].get<double>() - r.metric("units_per_s")) < 1e-6;
      EXPECT_TRUE(found) << r.config;
    }
  EXPECT_EQ(cs.tables["ref-utilization"].size(), 12u);  // FLOPS and CPU per run
  for (const auto& row : cs.tables["ref-scatter"])
    EXPECT_EQ(row["reference"].get<bool>(), row["family"] == testing::kFakeReference);

  const std::string html = render_report(runs, s, cs, {});
  EXPECT_NE(html.find("<h2 id=\"reference\">Reference models</h2>"), std::string::npos);
  EXPECT_NE(html.find("href=\"#reference\""), std::string::npos);
  EXPECT_NE(html.find("image classification"), std::string::npos);
  EXPECT_NE(html.find("images/s"), std::string::npos);
}

}  // namespace
}  // namespace tb
