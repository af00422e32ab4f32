// Measurement cost: how many steps and how much wall time the adaptive stop (default
// SteadyStateOptions: MSER-5 warm-up, +-1% 95% CI, 30 s budget) needs, against a fixed
// 500-step run (SteadyStateOptions.fixed_steps = 500) of the same config, and how far
// apart their mean step times are (target: <= 2%). Adaptive and fixed runs alternate
// in one process; each process's figures are medians over its repetitions, and the
// benchmark's are medians over --processes fresh processes (default 5). Targets: the
// adaptive mean within 2% of the fixed run's, with <= 25% of its steps.
#include "bench_common.h"
#include "spec/config.h"

namespace {

using namespace tb::bench;
using nlohmann::json;

const char* kUsage =
    "measurement_cost [--processes N] [--reps N] [--config C]... [--fixed-steps N] [--out PATH]\n"
    "Adaptive stop (default options) vs a fixed-step run of the same config.";

struct Run {
  tb::RunResult r;
  double total_s = 0;  // run_config call, model build included
};

Run run(const tb::Config& c, const tb::RunOptions& o) {
  const auto t0 = Clock::now();
  Run x{tb::run_config(c, o), 0};
  x.total_s = seconds_since(t0);
  if (x.r.status != tb::Status::kOk) {
    std::cerr << "run_config failed for " << c.str() << ": " << tb::to_string(x.r.status) << ": "
              << x.r.error << "\n";
    std::exit(1);
  }
  return x;
}

json to_row(const Run& x) {
  const auto& s = x.r.steps;
  return {{"mean_s", s.mean},
          {"median_s", s.median},
          {"ci95_relative", s.ci.relative()},
          {"steps", s.steps},
          {"warmup", s.warmup},
          {"samples", s.samples},
          {"end_reason", s.end_reason},
          {"stationary", s.stationary},
          {"timed_wall_s", s.wall_s},
          {"total_wall_s", x.total_s},
          {"cpu_process", x.r.cpu.process},
          {"cpu_system", x.r.cpu.system}};
}

std::string describe(const Run& x) {
  const auto& s = x.r.steps;
  return fmt::format(
      "mean {} +-{:.2f}%, {} steps ({} warm-up, {}{}), {:.2f} s timed, {:.2f} s total",
      fmt_time(s.mean), 100 * s.ci.relative(), s.steps, s.warmup, s.end_reason,
      s.stationary ? "" : ", NOT stationary", s.wall_s, x.total_s);
}

int across_processes(int argc, char** argv, int n, const std::string& out) {
  const std::vector<json> docs = in_fresh_processes(argc, argv, n, "measurement_cost");
  json doc = document("measurement_cost");
  doc["method"] = fmt::format("{} fresh processes, each: {}; figures = medians over the processes",
                              n, docs.front().value("method", ""));
  doc["targets"] = {{"max_abs_rel_diff", 0.02}, {"max_step_share", 0.25}};
  json results = json::array();
  std::vector<std::string> summary;
  std::cout << "\n";
  for (size_t i = 0; i < docs.front()["results"].size(); ++i) {
    std::vector<double> diffs, abs_diffs, steps;
    const std::string config = docs.front()["results"][i]["config"];
    const double fixed = docs.front()["results"][i]["fixed_steps"].get<double>();
    std::string each;
    for (const auto& d : docs) {
      const json& r = d["results"][i];
      diffs.push_back(r["median_rel_diff"].get<double>());
      abs_diffs.push_back(std::abs(diffs.back()));
      steps.push_back(r["median_adaptive_steps"].get<double>());
      each += fmt::format(" {:+.2f}%/{:.0f}", 100 * diffs.back(), steps.back());
    }
    const double diff = median(diffs), share = median(steps) / fixed;
    const bool pass = std::abs(diff) <= 0.02 && share <= 0.25;
    std::cout << fmt::format(
        "{}: adaptive vs fixed mean (steps) per process{}; median {:+.2f}%, "
        "{:.0f} steps = {:.0f}% of {}  targets |diff| <= 2%, <= 25%: {}\n",
        config, each, 100 * diff, median(steps), 100 * share, fixed, pass ? "PASS" : "FAIL");
    summary.push_back(fmt::format(
        "measurement_cost {}: median over {} processes: mean rel diff "
        "{:+.2f}%, {:.0f} steps ({:.0f}% of the fixed {}) ({})",
        config, n, 100 * diff, median(steps), 100 * share, fixed, pass ? "PASS" : "FAIL"));
    results.push_back({{"config", config},
                       {"per_process_rel_diff", diffs},
                       {"per_process_adaptive_steps", steps},
                       {"median_rel_diff", diff},
                       {"median_abs_rel_diff", median(abs_diffs)},
                       {"median_step_share", share},
                       {"pass", pass}});
  }
  doc["results"] = results;
  doc["processes"] = docs;
  write_json(out, doc);
  for (const auto& s : summary) std::cout << "SUMMARY " << s << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tb::ensure_runtime_environment(argc, argv);
  tb::prepare_runtime();
  Args args = parse_args(argc, argv, "measurement_cost", kUsage);
  const int processes = int(extra_number(args, "processes", 5));
  if (processes > 1) return across_processes(argc, argv, processes, args.out);
  const int reps = args.reps > 0 ? args.reps : 1;
  const int64_t fixed_steps = int64_t(extra_number(args, "fixed-steps", 500));
  if (args.configs.empty())
    args.configs = {"fc:layers=4,nodes=32,input=2000,output=200,batch=64",
                    "fc:layers=4,nodes=256,input=2000,output=200,batch=128",
                    "cnn:block=residual,blocks=1,filters=16,image=64,batch=8"};

  json doc = document("measurement_cost");
  tb::RunOptions adaptive_opts;
  tb::RunOptions fixed_opts;
  fixed_opts.timing.fixed_steps = fixed_steps;
  doc["method"] = fmt::format(
      "per repetition: tb::run_config with default options (target_rel_ci {}, budget {} s, "
      "min_samples {}), then with fixed_steps={}; {} repetitions interleaved; relative "
      "difference = (adaptive mean - fixed mean) / fixed mean per repetition, median reported",
      adaptive_opts.timing.target_rel_ci, adaptive_opts.timing.budget_s,
      adaptive_opts.timing.min_samples, fixed_steps, reps);
  doc["target_max_abs_rel_diff"] = 0.02;
  json results = json::array();
  std::vector<std::string> summary;

  for (const auto& text : args.configs) {
    const tb::Config config = tb::parse_config(text);
    std::cout << "\n== " << config.str() << "\n";
    json rows = json::array();
    std::vector<double> a_steps, a_timed, a_total, f_timed, f_total, a_mean, f_mean, diffs;
    for (int rep = 0; rep < reps; ++rep) {
      const Run a = run(config, adaptive_opts);
      const Run f = run(config, fixed_opts);
      const double d = (a.r.steps.mean - f.r.steps.mean) / f.r.steps.mean;
      a_steps.push_back(double(a.r.steps.steps));
      a_timed.push_back(a.r.steps.wall_s);
      a_total.push_back(a.total_s);
      f_timed.push_back(f.r.steps.wall_s);
      f_total.push_back(f.total_s);
      a_mean.push_back(a.r.steps.mean);
      f_mean.push_back(f.r.steps.mean);
      diffs.push_back(d);
      std::cout << fmt::format(
          "rep {}: adaptive {}\n       fixed    {}\n       rel diff {:+.2f}%\n", rep + 1,
          describe(a), describe(f), 100 * d);
      rows.push_back({{"adaptive", to_row(a)}, {"fixed", to_row(f)}, {"rel_diff", d}});
    }
    std::vector<double> abs_diffs;
    for (double d : diffs) abs_diffs.push_back(std::abs(d));
    const double med_diff = median(diffs), med_abs = median(abs_diffs);
    const double diff_of_medians = (median(a_mean) - median(f_mean)) / median(f_mean);
    const bool pass = med_abs <= 0.02;
    std::cout << fmt::format(
        "median: adaptive {:.0f} steps, {:.2f} s timed ({:.2f} s total) | fixed {} steps, "
        "{:.2f} s timed ({:.2f} s total) | steps adaptive/fixed {:.3f}, timed wall "
        "adaptive/fixed {:.3f} | mean adaptive {} vs fixed {} | rel diff median {:+.2f}% "
        "(|.| {:.2f}%, diff of medians {:+.2f}%)  target |diff| <= 2%: {}\n",
        median(a_steps), median(a_timed), median(a_total), fixed_steps, median(f_timed),
        median(f_total), median(a_steps) / double(fixed_steps), median(a_timed) / median(f_timed),
        fmt_time(median(a_mean)), fmt_time(median(f_mean)), 100 * med_diff, 100 * med_abs,
        100 * diff_of_medians, pass ? "PASS" : "FAIL");
    summary.push_back(fmt::format(
        "measurement_cost {}: adaptive {:.0f} steps / {:.2f} s timed vs fixed {} steps / {:.2f} s; "
        "mean rel diff {:+.2f}% ({})",
        text, median(a_steps), median(a_timed), fixed_steps, median(f_timed), 100 * med_diff,
        pass ? "PASS" : "FAIL"));
    results.push_back({{"config", config.str()},
                       {"repetitions", rows},
                       {"median_adaptive_steps", median(a_steps)},
                       {"median_adaptive_timed_wall_s", median(a_timed)},
                       {"median_adaptive_total_wall_s", median(a_total)},
                       {"fixed_steps", fixed_steps},
                       {"median_fixed_timed_wall_s", median(f_timed)},
                       {"median_fixed_total_wall_s", median(f_total)},
                       {"median_adaptive_mean_s", median(a_mean)},
                       {"median_fixed_mean_s", median(f_mean)},
                       {"median_rel_diff", med_diff},
                       {"median_abs_rel_diff", med_abs},
                       {"rel_diff_of_medians", diff_of_medians},
                       {"pass", pass}});
  }
  doc["results"] = results;
  std::cout << "\n";
  write_json(args.out, doc);
  for (const auto& s : summary) std::cout << "PROCESS " << s << "\n";
  return 0;
}
