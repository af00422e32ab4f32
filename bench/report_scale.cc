// How long analysing and rendering a large store takes, and how big the report gets:
// a synthetic store of --runs runs (default 10,000; fc over two platforms, some
// oom-predicted), analysed and rendered --reps times in this process, stage by stage, and
// once through the trainbench program. Targets: under 5 s in all, a report under 10 MB.
#include <unistd.h>

#include "analysis/summary.h"
#include "base/files.h"
#include "bench_common.h"
#include "report/html_report.h"
#include "support/synthetic_store.h"

using namespace tb;
using namespace tb::bench;

int main(int argc, char** argv) {
  const Args a =
      parse_args(argc, argv, "report_scale",
                 "report_scale [--runs N] [--reps N] [--keep DIR] [--out PATH]\n"
                 "Times load, analysis, chart building and HTML rendering of a synthetic store.");
  const size_t n = size_t(extra_number(a, "runs", 10000));
  const int reps = a.reps > 0 ? a.reps : 5;
  // --keep DIR leaves the store and the report there (to open the report in a browser).
  std::string keep;
  for (const auto& [k, v] : a.extra)
    if (k == "keep") keep = v;
  const std::string dir = !keep.empty()
                              ? keep
                              : std::string(std::filesystem::temp_directory_path() /
                                            ("tb-report-scale-" + std::to_string(getpid())));
  std::filesystem::create_directories(dir);
  const std::string store = dir + "/synthetic.db", html = dir + "/report.html";
  auto t0 = Clock::now();
  std::filesystem::remove(store);
  {
    auto s = Store::open(store);
    testing::SyntheticOptions o;
    o.runs = n;
    testing::fill_synthetic_store(*s, o);
  }
  const double fill_s = seconds_since(t0);

  std::vector<double> load, analyse, charts, render, total;
  size_t bytes = 0, runs = 0, nchart = 0;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    const RunSet set = load_runs({store});
    load.push_back(seconds_since(t));
    t = Clock::now();
    const Summary s = summarize(set);
    analyse.push_back(seconds_since(t));
    t = Clock::now();
    const ChartSet cs = build_charts(set, s);
    charts.push_back(seconds_since(t));
    t = Clock::now();
    const std::string text = render_report(set, s, cs, {});
    write_file_atomically(html, text);
    render.push_back(seconds_since(t));
    total.push_back(load.back() + analyse.back() + charts.back() + render.back());
    bytes = text.size(), runs = set.runs.size(), nchart = cs.charts.size();
  }
  std::vector<double> cli;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    const int rc = std::system(
        (std::string(TB_BINARY) + " report " + store + " -o " + html + " > /dev/null").c_str());
    cli.push_back(seconds_since(t));
    if (rc != 0) {
      std::cerr << "report_scale: trainbench report failed\n";
      return 1;
    }
  }
  std::cout << fmt::format(
      "store of {} runs (filled in {:.1f} s); {} charts; medians of {} reps:\n", runs, fill_s,
      nchart, reps);
  std::cout << fmt::format(
      "  load {:.3f} s, analyse {:.3f} s, charts {:.3f} s, render+write {:.3f} s: total {:.3f} s\n",
      median(load), median(analyse), median(charts), median(render), median(total));
  std::cout << fmt::format("  trainbench report (whole process): {:.3f} s\n", median(cli));
  std::cout << fmt::format(
      "SUMMARY report_scale: {} runs analysed and rendered in {:.2f} s (CLI {:.2f} s; target < 5 "
      "s), "
      "report {:.2f} MB (target < 10 MB)\n",
      runs, median(total), median(cli), double(bytes) / 1e6);
  nlohmann::json doc = document("report_scale");
  doc["runs"] = runs;
  doc["charts"] = nchart;
  doc["report_bytes"] = bytes;
  doc["seconds"] = {{"load", load},     {"analyse", analyse}, {"charts", charts},
                    {"render", render}, {"total", total},     {"cli", cli}};
  doc["median_total_s"] = median(total);
  doc["median_cli_s"] = median(cli);
  doc["target"] = {{"seconds", 5}, {"bytes", 10e6}};
  write_json(a.out, doc);
  if (keep.empty()) std::filesystem::remove_all(dir);
  return median(cli) < 5 && bytes < 10e6 ? 0 : 1;
}
