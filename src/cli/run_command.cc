#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "base/errors.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "jobs/data_parallel.h"
#include "jobs/repeat.h"
#include "platform/registry.h"
#include "record/json.h"
#include "report/profile_table.h"
#include "report/run_table.h"
#include "runner/characterize.h"
#include "runner/distributed.h"
#include "runner/memory.h"
#include "runner/runner.h"
#include "runner/stack_runtime.h"
#include "spec/config.h"
#include "spec/printable.h"

namespace tb::cli {
namespace {

struct RunArgs {
  std::vector<std::string> configs;
  std::string family;
  std::string torchscript;  // sugar for --family torchscript --path FILE
  std::string stack;
  std::map<std::string, std::string> params;  // --<param> VALUE, for --family
  bool json = false, per_layer = false;
  bool memory = false;  // also measure the memory breakdown of one step (runner/memory.h)
  std::string output;   // also write the JSON document here
  RunOptions options;
  double peak_gflops = 0, memory_limit_gib = 0;
  std::string platform;  // registry name, file, or empty: this host's cached description
  int workers = 0;       // 0: as the config says
  int repetitions = 1;   // fresh processes per config
  DistOptions dist;
};

// The job a child of this command runs (a repetition, or a rank the local launcher starts):
// this config with the same timing, seed, platform and limits.
JobSpec child_job(const RunArgs& a, const Config& c, const StackSpec& stack) {
  JobSpec j;
  j.config = c;
  j.stack = stack;
  j.timing = a.options.timing;
  j.seed = a.options.seed;
  j.platform = a.platform;
  j.peak_gflops = a.peak_gflops;
  j.memory_limit_gib = a.memory_limit_gib;
  j.dist = a.dist;
  return j;
}

// One option per parameter name of any family, so `--family fc --layers 4` works;
// make_config() rejects the ones the chosen family does not have.
void add_param_options(CLI::App* sub, RunArgs& a) {
  std::set<std::string> names;
  for (const auto* s : family_schemas())
    for (const auto& p : s->params) names.insert(p.name);
  names.erase("workers");  // --workers is an option of its own, with or without --family
  for (const auto& n : names)
    sub->add_option_function<std::string>(
           "--" + n, [&a, n](const std::string& v) { a.params[n] = v; },
           "with --family: the family's '" + n + "' parameter")
        ->group("Workload parameters (with --family)");
}

// The context's intra-op threads are those the runs used: with --repetitions or --workers the
// runs are child processes, and this process's own count (it ran nothing) described none.
void threads_from_runs(Context& ctx, const std::vector<nlohmann::json>& results) {
  std::set<int> counts;
  for (const auto& r : results)
    if (r.contains("threads") && r["threads"].is_number_integer() && r["threads"].get<int>() > 0)
      counts.insert(r["threads"].get<int>());
  // Runs of different counts: the context states none of them (0), each result its own.
  if (!counts.empty()) ctx.openmp_threads = counts.size() == 1 ? *counts.begin() : 0;
}

// `run --repetitions N`: each config in N child processes of this same command.
int run_repetitions(const RunArgs& a, const std::vector<Config>& configs, const StackSpec& stack) {
  if (a.memory) throw UsageError("--memory with --repetitions: measure the memory in one run");
  std::vector<JobSpec> jobs;
  for (const auto& c : configs) {
    if (c.get_int("workers") > 1)
      throw UsageError("--repetitions with workers=" + c.get("workers") +
                       ": repeat a data-parallel run by running it again");
    jobs.push_back(child_job(a, c, stack));
  }
  ChildOptions co;
  co.binary = "/proc/self/exe";
  co.timeout_s = 3 * a.options.timing.budget_s + 60;
  co.memory_limit = a.memory_limit_gib > 0 ? int64_t(a.memory_limit_gib * double(1LL << 30)) : 0;
  const bool tty = isatty(STDERR_FILENO);
  const auto results =
      run_repeated(jobs, a.repetitions, co, [&](size_t i, int rep, const nlohmann::json& r) {
        if (a.json && !tty) return;
        const std::string what =
            r.value("status", "") == "ok"
                ? fmt::format("mean {:.4g} ms +-{:.2f}%",
                              1e3 * number_or(r["timing"], "mean_s", 0.0),
                              100 * number_or(r["timing"], "ci95_relative", NAN))
                : r.value("status", "") + ": " + r.value("error", "");
        std::cerr << fmt::format("process {}/{} {}: {}\n", rep, a.repetitions, jobs[i].config.str(),
                                 printable(what));
      });
  Context ctx = current_context();
  threads_from_runs(ctx, results);
  auto doc = run_document(ctx, {}, a.per_layer);
  for (const auto& r : results) doc["results"].push_back(r);
  if (a.json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    for (const auto& r : results) std::cout << format_repeated(r) << "\n";
    std::cout << format_context(ctx);
  }
  if (!a.output.empty()) write_file_atomically(a.output, doc.dump(2) + "\n");
  int status = 0;
  for (const auto& r : results) {
    const std::string st = r.value("status", "crashed");
    if (st == "invalid") {
      std::cerr << "trainbench: " << printable(r.value("error", "")) << "\n";
      return 2;
    }
    if (st != "ok") status = 1;
  }
  return status;
}

}  // namespace

void apply_torchscript_sugar(const std::string& file, std::string& family,
                             std::map<std::string, std::string>& params) {
  if (file.empty()) {
    if (family == "torchscript" && params.count("input"))
      std::replace(params["input"].begin(), params["input"].end(), ',', '+');
    return;
  }
  if (!family.empty() && family != "torchscript")
    throw UsageError("--torchscript " + file + " cannot be combined with --family " + family);
  if (params.count("path"))
    throw UsageError("--torchscript and --path name the same file: give one");
  family = "torchscript";
  std::string path = file;
  if (!path.empty() && path[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) path = std::string(cwd) + "/" + path;
  }
  params["path"] = path;
  if (!params.count("input"))
    throw UsageError("--torchscript " + file + ": give the input shapes, e.g. --input 3x224x224");
  std::replace(params["input"].begin(), params["input"].end(), ',', '+');
}

Command add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Train configs and measure their steady-state step time");
  sub->add_option(
      "config", a->configs,
      "config strings, e.g. fc:layers=4,nodes=1024,batch=512; a stack:... string among them sets "
      "the software stack");
  sub->add_option(
      "--stack", a->stack,
      "software stack, e.g. blas=blis-pthread,blas_threads=2,onednn=off,mode=torchscript");
  sub->add_option("--family", a->family, "build the config from --<param> options instead");
  sub->add_option(
      "--torchscript", a->torchscript,
      "train this TorchScript file (torch.jit.save): --family torchscript --path FILE; "
      "with --input SHAPE[,SHAPE...] (no batch dimension) and --target classes|regression");
  sub->add_flag("--json", a->json, "print a versioned JSON document instead of a table");
  sub->add_flag("--per-layer", a->per_layer, "include the per-layer cost in the output");
  sub->add_flag("--memory", a->memory,
                "also measure the memory breakdown of one step (as `trainbench memory`)");
  sub->add_option("-o,--out", a->output, "also write the JSON document to this file");
  auto& t = a->options.timing;
  sub->add_option("--target-ci", t.target_rel_ci,
                  "stop when the 95% CI half-width of the mean step time is within this fraction")
      ->transform(number_in(1e-4, 0.5))
      ->capture_default_str();
  sub->add_option("--budget", t.budget_s, "seconds of timed steps at most, per config")
      ->transform(number_in(0.01, 1e6))
      ->capture_default_str();
  sub->add_option("--min-samples", t.min_samples, "stationary steps needed before stopping")
      ->transform(number_in(2, 1000000))
      ->capture_default_str();
  sub->add_option("--min-time", t.min_time_s,
                  "seconds of stationary steps needed before stopping (at most half the budget)")
      ->transform(number_in(0.0, 1e6))
      ->capture_default_str();
  sub->add_option("--steps", t.fixed_steps, "run exactly this many steps (no early stop)")
      ->transform(number_in(2, 100000000));
  sub->add_option("--max-steps", t.max_steps, "stop after this many steps")
      ->transform(number_in(2, 100000000));
  sub->add_option("--seed", a->options.seed, "seed for weights and synthetic data")
      ->transform(unsigned_integer())
      ->capture_default_str();
  sub->add_option("--platform", a->platform,
                  "platform for utilization and roofline: a registry name or file "
                  "(default: this host's cached `trainbench platform` description)");
  sub->add_option("--peak-gflops", a->peak_gflops, "platform peak for FLOPS utilization, GFLOP/s")
      ->check(positive_number());
  sub->add_option("--memory-limit", a->memory_limit_gib,
                  "GiB the run may use; larger estimates are oom-predicted (default: available)")
      ->check(positive_number());
  sub->add_option(
         "--workers", a->workers,
         "data-parallel worker processes (sets the config's workers=N); trainbench starts "
         "them here, or each is started by torchrun/srun with RANK, WORLD_SIZE, MASTER_ADDR, "
         "MASTER_PORT set")
      ->transform(number_in(1, 4096));
  sub->add_option("--dist-timeout", a->dist.timeout_s,
                  "seconds a data-parallel run waits for a worker to join or answer before failing")
      ->transform(number_in(0.5, 86400.0))
      ->capture_default_str();
  sub->add_option("--bucket-mib", a->dist.bucket_mib,
                  "gradient bucket size of data-parallel runs, MiB")
      ->transform(number_in(0.001, 4096.0))
      ->capture_default_str();
  sub->add_option("--repetitions", a->repetitions,
                  "measure every config in N fresh processes, interleaved; prints each process's "
                  "mean, the spread between them, and the median process's mean as the step time")
      ->transform(number_in(1, 100))
      ->capture_default_str();
  add_param_options(sub, *a);
  sub->footer(
      "Examples:\n"
      "  trainbench run fc:layers=4,nodes=1024,input=2000,output=200,batch=512,dtype=fp32\n"
      "  trainbench run --family fc --layers 8 --nodes 2048 --batch 1024\n"
      "  trainbench run cnn:block=residual,blocks=1,filters=16,image=64,batch=8 --json\n"
      "  trainbench run rnn:cell=gru,layers=2,embed=256,length=20,vocab=1024,batch=32 --budget 10\n"
      "  trainbench run fc:batch=64,nodes=32 --steps 500        # fixed count, no early stop\n"
      "  trainbench run fc:nodes=32,batch=64 --repetitions 5   # 5 fresh processes, their spread\n"
      "  trainbench run fc:nodes=512,batch=256 -o result.json   # table on screen, JSON in a file\n"
      "  trainbench run fc:nodes=4096,batch=8192,dtype=bf16 --platform tpu-v2-board --steps 3  # "
      "roofline\n"
      "  trainbench run fc:nodes=1024,batch=512 --memory      # + measured memory breakdown\n"
      "  trainbench run fc:nodes=2048,batch=512 stack:blas=blis-pthread,mode=torchscript\n"
      "  trainbench run fc:nodes=1024,batch=64,threads=1 --workers 2   # data-parallel, 2 "
      "processes\n"
      "  trainbench run fc:nodes=512,batch=64,numerics=w:e4m3+a:e4m3+e:e5m2+g:e5m2+ls:dynamic\n"
      "      # emulated formats in the step (docs/numerics.md); numerics=bf16: bf16 everywhere\n"
      "  trainbench run --torchscript model.pt --input 3x32x32 --target classes --batch 16\n"
      "  trainbench run torchscript:path=/abs/mlp.pt,input=64,target=regression,batch=32\n"
      "  torchrun --nnodes 2 --nproc-per-node 1 ... trainbench run fc:batch=64 --workers 2  # per "
      "rank\n"
      "Every result prints its config with threads resolved: paste it to re-run.\n"
      "Exit status: 0 all ok, 1 some config not ok (see its status), 2 bad input.");
  return {sub, [a]() {
            std::vector<Config> configs;
            apply_torchscript_sugar(a->torchscript, a->family, a->params);
            // --workers goes into every config before it is checked: ZeRO needs workers > 1.
            std::vector<std::pair<std::string, std::string>> overrides;
            if (a->workers > 0) overrides.emplace_back("workers", std::to_string(a->workers));
            if (!a->family.empty()) {
              // Both would run, the --family one first: a config given beside --family was
              // taken for one of its parameters and not noticed among the results.
              for (const auto& text : a->configs)
                if (text.rfind("stack:", 0) != 0)
                  throw UsageError("config '" + text + "' and --" +
                                   (a->torchscript.empty() ? "family " + a->family
                                                           : "torchscript " + a->torchscript) +
                                   ": give a config string or --family, not both");
              std::vector<std::pair<std::string, std::string>> given(a->params.begin(),
                                                                     a->params.end());
              given.insert(given.end(), overrides.begin(), overrides.end());
              configs.push_back(make_config(a->family, given));
            } else if (!a->params.empty()) {
              throw UsageError("--" + a->params.begin()->first + " needs --family");
            }
            StackSpec stack = parse_stack(a->stack);
            for (const auto& text : a->configs) {
              if (text.rfind("stack:", 0) == 0)
                stack = parse_stack(text);
              else
                configs.push_back(parse_config(text, overrides));
            }
            if (configs.empty()) throw UsageError("run: give a config string or --family");
            std::optional<DistEnv> rank_env;
            for (const auto& c : configs)
              if (c.get_int("workers") > 1 && !rank_env) rank_env = dist_env_from_environment();
            const bool quiet = rank_env && rank_env->rank != 0;  // rank 0 speaks for the job
            check_output_file("--out", a->output);  // refused before running, not after
            enter_blas(stack);  // may re-execute the program with the stack's BLAS
            if (a->repetitions > 1) return run_repetitions(*a, configs, stack);
            a->options.stack = stack;
            if (a->peak_gflops > 0) a->options.peak_flops = a->peak_gflops * 1e9;
            if (!a->platform.empty()) {
              a->options.platform = find_platform(a->platform);
              // A description without the dtype's peak (a TPU states bf16 only) gives neither
              // figure: say so rather than leave them out without a word.
              if (!a->options.peak_flops)
                for (const auto& c : configs)
                  if (!a->options.platform->peak_flops(c.get("dtype")))
                    std::cerr << "note: " << printable(a->options.platform->name) << " states no "
                              << c.get("dtype") << " peak: no FLOPS utilization or roofline for "
                              << printable(c.str()) << " (--peak-gflops gives a peak)\n";
            } else {
              std::string why;
              a->options.platform =
                  load_cached_platform(platform_cache_path(), host_fingerprint(), &why);
              if (!a->options.platform && !a->options.peak_flops)
                std::cerr << "note: no platform description (" << why
                          << "): run `trainbench platform` for FLOPS utilization and roofline\n";
            }
            a->options.memory_limit = a->memory_limit_gib * double(1LL << 30);

            const bool tty = isatty(STDOUT_FILENO);
            std::vector<RunResult> results;
            std::vector<std::optional<MemoryRun>> memory;
            std::map<size_t, nlohmann::json> launched;  // results the local workers' rank 0 printed
            for (const auto& c : configs) {
              if (!a->json && tty && !quiet) std::cerr << "running " << c.str() << " ...\n";
              memory.emplace_back();
              if (c.get_int("workers") > 1) {
                // Ranks get no --stack: run_distributed applies no part of a stack but the BLAS the
                // ranks inherit from this process.
                const DataParallelOutcome dp =
                    run_data_parallel(child_job(*a, c, StackSpec{}), a->options, rank_env);
                const RunResult& r = dp.result;
                if (quiet && r.status != Status::kOk)
                  std::cerr << "trainbench: " << printable(r.error) << "\n";
                if (!dp.launched.is_null()) launched[results.size()] = dp.launched;
                results.push_back(r);
                if (!a->json && !quiet)
                  std::cout << format_distributed(launched.count(results.size() - 1)
                                                      ? launched[results.size() - 1]
                                                      : nlohmann::json(to_json(r, false)))
                            << "\n";
                continue;
              }
              results.push_back(run_config(c, a->options));
              if (a->memory && results.back().status == Status::kOk)
                memory.back() =
                    measure_memory(parse_config(results.back().config), MemoryOptions{});
              if (!a->json) {
                std::cout << format_result(results.back());
                if (memory.back() && memory.back()->status == Status::kOk)
                  std::cout << format_memory(memory.back()->breakdown);
                else if (memory.back())
                  std::cout << "memory    not measured: " << memory.back()->error << "\n";
                std::cout << "\n";
              }
            }
            Context ctx = current_context();
            if (!launched.empty()) {
              std::vector<nlohmann::json> ran;
              for (const auto& r : results) ran.push_back(to_json(r, false));
              threads_from_runs(ctx, ran);
            }
            auto doc = run_document(ctx, results, a->per_layer);
            for (const auto& [i, r] : launched) doc["results"][i] = r;
            if (quiet) {
              for (const auto& r : results)
                if (r.status != Status::kOk) return 1;
              return 0;
            }
            for (size_t i = 0; i < memory.size(); ++i)
              if (memory[i]) {
                const MemoryRun& m = *memory[i];
                doc["results"][i]["memory"] =
                    m.status == Status::kOk
                        ? to_json(m.breakdown, false)
                        : nlohmann::json{{"status", to_string(m.status)}, {"error", m.error}};
              }
            if (a->json)
              std::cout << doc.dump(2) << "\n";
            else
              std::cout << format_context(ctx) << placement_moved(results, ctx);
            if (!a->output.empty()) write_file_atomically(a->output, doc.dump(2) + "\n");
            // A model that cannot be trained (a broken TorchScript file) is bad input, though it
            // is only found out while building it: one line and status 2, the result printed too.
            for (const auto& r : results)
              if (r.status == Status::kInvalid) {
                std::cerr << "trainbench: " << printable(r.error) << "\n";
                return 2;
              }
            for (const auto& r : results)
              if (r.status != Status::kOk) return 1;
            return 0;
          }};
}

}  // namespace tb::cli
