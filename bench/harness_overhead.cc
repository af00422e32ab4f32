// Harness overhead: the steady-state step time tb::run_config reports (what
// `trainbench run` prints) against a bare LibTorch loop over the same workload, timed
// with nothing but two clock reads around a block of steps. Repetitions alternate
// harness, bare, harness, bare, ... in one process; each process's figure is the median
// of its per-repetition ratios harness/bare, and the benchmark's figure is the median
// over --processes fresh processes (default 5; target 0.98-1.02).
#include "bench_common.h"
#include "model/workload.h"
#include "spec/config.h"

namespace {

using namespace tb::bench;
using nlohmann::json;

const char* kUsage =
    "harness_overhead [--processes N] [--reps N] [--config C]... [--out PATH]\n"
    "  [--warmup-steps N] [--warmup-s S] [--min-steps N] [--min-s S]   (bare loop)\n"
    "Compares tb::run_config's steady-state mean step time with a bare LibTorch loop.";

struct Bare {
  double mean = 0, median = 0;
  int64_t warmup = 0, steps = 0;
  double wall = 0;
};

// Same construction as run_config: seed, build, move to device/dtype, train mode, one
// batch, the config's optimizer; then zero-grad (grads released, as run_config does)
// / forward+loss / backward / step, timed as one block after the warm-up.
Bare bare_loop(const tb::Config& config, uint64_t seed, int64_t warmup_steps, double warmup_s,
               int64_t min_steps, double min_s) {
  tb::apply_threads(int(config.get_int("threads")));
  torch::manual_seed(seed);
  auto w = tb::build_workload(config);
  const torch::Dtype dtype = tb::dtype_of(config);
  const torch::Device device(config.get("device"));
  w->module().to(device, dtype);
  w->module().train();
  const tb::Batch batch = w->make_batch(device, dtype, seed);
  auto opt = tb::make_optimizer(config, w->module());
  std::vector<torch::Tensor> params = w->module().parameters();
  auto step = [&] {
    for (auto& p : params) p.mutable_grad().reset();
    auto loss = w->loss(batch);
    loss.backward();
    opt->step();
    if (device.is_cuda()) torch::cuda::synchronize();
  };

  Bare b;
  const auto w0 = Clock::now();
  while (b.warmup < warmup_steps || seconds_since(w0) < warmup_s) {
    step();
    ++b.warmup;
  }
  // One clock read per step: the mean is the whole block's time / steps, the per-step
  // differences only give the median.
  std::vector<double> times;
  times.reserve(4096);
  const auto t0 = Clock::now();
  auto last = t0;
  double elapsed = 0;
  while (b.steps < min_steps || elapsed < min_s) {
    step();
    ++b.steps;
    const auto now = Clock::now();
    times.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
    elapsed = std::chrono::duration<double>(now - t0).count();
  }
  b.wall = elapsed;
  b.mean = elapsed / double(b.steps);
  b.median = median(times);
  return b;
}

// The figure over fresh processes: each one's median ratio, and their median.
int across_processes(int argc, char** argv, int n, const std::string& out) {
  const std::vector<json> docs = in_fresh_processes(argc, argv, n, "harness_overhead");
  json doc = document("harness_overhead");
  doc["method"] = fmt::format(
      "{} fresh processes, each: {}; figure = median over the processes "
      "of each process's median harness/bare ratio",
      n, docs.front().value("method", ""));
  doc["target_ratio"] = {0.98, 1.02};
  json results = json::array();
  std::vector<std::string> summary;
  const size_t configs = docs.front()["results"].size();
  std::cout << "\n";
  for (size_t i = 0; i < configs; ++i) {
    std::vector<double> ratios, harness, bare;
    for (const auto& d : docs) {
      const json& r = d["results"][i];
      ratios.push_back(r["median_ratio"].get<double>());
      harness.push_back(r["median_harness_mean_s"].get<double>());
      bare.push_back(r["median_bare_mean_s"].get<double>());
    }
    const std::string config = docs.front()["results"][i]["config"];
    const double med = median(ratios);
    const bool pass = med >= 0.98 && med <= 1.02;
    std::string each;
    for (double r : ratios) each += fmt::format(" {:.4f}", r);
    std::cout << fmt::format(
        "{}: harness/bare per process{}; median {:.4f} (harness {} .. {}, bare {} .. {})  target "
        "0.98-1.02: {}\n",
        config, each, med, fmt_time(*std::min_element(harness.begin(), harness.end())),
        fmt_time(*std::max_element(harness.begin(), harness.end())),
        fmt_time(*std::min_element(bare.begin(), bare.end())),
        fmt_time(*std::max_element(bare.begin(), bare.end())), pass ? "PASS" : "FAIL");
    summary.push_back(
        fmt::format("harness_overhead {}: median over {} processes harness/bare "
                    "{:.4f} (per process{}) ({})",
                    config, n, med, each, pass ? "PASS" : "FAIL"));
    results.push_back({{"config", config},
                       {"per_process_median_ratio", ratios},
                       {"per_process_harness_mean_s", harness},
                       {"per_process_bare_mean_s", bare},
                       {"median_ratio", med},
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
  Args args = parse_args(argc, argv, "harness_overhead", kUsage);
  const int processes = int(extra_number(args, "processes", 5));
  if (processes > 1) return across_processes(argc, argv, processes, args.out);
  const int reps = args.reps > 0 ? args.reps : 3;
  if (args.configs.empty())
    args.configs = {"fc:layers=4,nodes=32,input=2000,output=200,batch=64",
                    "fc:layers=4,nodes=2048,input=2000,output=200,batch=512"};
  const int64_t warmup_steps = int64_t(extra_number(args, "warmup-steps", 10));
  const double warmup_s = extra_number(args, "warmup-s", 1.0);
  const int64_t min_steps = int64_t(extra_number(args, "min-steps", 10));
  const double min_s = extra_number(args, "min-s", 3.0);

  json doc = document("harness_overhead");
  doc["method"] = fmt::format(
      "per repetition: tb::run_config with default RunOptions (mean of its steady-state "
      "samples), then a bare loop in the same process ({}+ warm-up steps and >= {} s dropped, "
      "then >= {} steps and >= {} s timed as one block); {} repetitions interleaved; figure = "
      "median of per-repetition harness/bare ratios",
      warmup_steps, warmup_s, min_steps, min_s, reps);
  doc["target_max_ratio"] = 1.02;
  json results = json::array();
  std::vector<std::string> summary;

  for (const auto& text : args.configs) {
    const tb::Config config = tb::parse_config(text);
    std::cout << "\n== " << config.str() << "\n";
    json rows = json::array();
    std::vector<double> ratios, median_ratios, hmeans, bmeans;
    for (int rep = 0; rep < reps; ++rep) {
      tb::RunOptions opts;  // defaults: what `trainbench run` uses
      const auto h0 = Clock::now();
      const tb::RunResult r = tb::run_config(config, opts);
      const double h_total = seconds_since(h0);
      if (r.status != tb::Status::kOk) {
        std::cerr << "run_config failed: " << tb::to_string(r.status) << ": " << r.error << "\n";
        return 1;
      }
      const Bare b = bare_loop(config, opts.seed, warmup_steps, warmup_s, min_steps, min_s);
      const double ratio = r.steps.mean / b.mean;
      ratios.push_back(ratio);
      median_ratios.push_back(r.steps.median / b.median);
      hmeans.push_back(r.steps.mean);
      bmeans.push_back(b.mean);
      std::cout << fmt::format(
          "rep {}: harness mean {} ({} samples after {} warm-up, {}, {:.1f} s total)  "
          "bare mean {} ({} steps after {} warm-up)  ratio {:.4f}  (medians: {} / {} = {:.4f})\n",
          rep + 1, fmt_time(r.steps.mean), r.steps.samples, r.steps.warmup, r.steps.end_reason,
          h_total, fmt_time(b.mean), b.steps, b.warmup, ratio, fmt_time(r.steps.median),
          fmt_time(b.median), median_ratios.back());
      rows.push_back({{"harness_mean_s", r.steps.mean},
                      {"harness_median_s", r.steps.median},
                      {"harness_ci95_relative", r.steps.ci.relative()},
                      {"harness_steps", r.steps.steps},
                      {"harness_warmup", r.steps.warmup},
                      {"harness_samples", r.steps.samples},
                      {"harness_end_reason", r.steps.end_reason},
                      {"harness_stationary", r.steps.stationary},
                      {"harness_total_wall_s", h_total},
                      {"harness_cpu_process", r.cpu.process},
                      {"harness_cpu_system", r.cpu.system},
                      {"bare_mean_s", b.mean},
                      {"bare_median_s", b.median},
                      {"median_step_ratio", median_ratios.back()},
                      {"bare_steps", b.steps},
                      {"bare_warmup", b.warmup},
                      {"bare_wall_s", b.wall},
                      {"ratio", ratio}});
    }
    const double med_ratio = median(ratios);
    const double ratio_of_medians = median(hmeans) / median(bmeans);
    const bool pass = med_ratio <= 1.02;
    std::cout << fmt::format(
        "median harness {}  median bare {}  median ratio {:.4f}  (ratio of medians {:.4f}, "
        "min {:.4f}, max {:.4f}; per-step medians ratio {:.4f})  target <= 1.02: {}\n",
        fmt_time(median(hmeans)), fmt_time(median(bmeans)), med_ratio, ratio_of_medians,
        *std::min_element(ratios.begin(), ratios.end()),
        *std::max_element(ratios.begin(), ratios.end()), median(median_ratios),
        pass ? "PASS" : "FAIL");
    summary.push_back(fmt::format("harness_overhead {}: median harness/bare {:.4f} ({})", text,
                                  med_ratio, pass ? "PASS" : "FAIL"));
    results.push_back({{"config", config.str()},
                       {"repetitions", rows},
                       {"median_harness_mean_s", median(hmeans)},
                       {"median_bare_mean_s", median(bmeans)},
                       {"median_ratio", med_ratio},
                       {"ratio_of_medians", ratio_of_medians},
                       {"median_of_step_median_ratios", median(median_ratios)},
                       {"pass", pass}});
  }
  doc["results"] = results;
  std::cout << "\n";
  write_json(args.out, doc);
  for (const auto& s : summary) std::cout << "PROCESS " << s << "\n";
  return 0;
}
