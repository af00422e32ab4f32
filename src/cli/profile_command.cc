// `trainbench profile` and `trainbench memory`: the TBD toolchain's per-operator and
// memory breakdowns of one config.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "base/errors.h"
#include "base/files.h"
#include "base/sizes.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "jobs/sweep_runner.h"
#include "platform/registry.h"
#include "record/context.h"
#include "record/json.h"
#include "report/profile_table.h"
#include "report/run_table.h"
#include "runner/characterize.h"
#include "runner/memory.h"
#include "runner/profile.h"
#include "spec/config.h"
#include "spec/printable.h"
#include "store/store.h"

namespace tb::cli {
namespace {

using nlohmann::json;

// The platform the utilization is against: --platform, or this host's cached description.
std::optional<PlatformDescription> resolve_platform(const std::string& name, bool quiet) {
  if (!name.empty()) return find_platform(name);
  std::string why;
  auto p = load_cached_platform(platform_cache_path(), host_fingerprint(), &why);
  if (!p && !quiet)
    std::cerr << "note: no platform description (" << why
              << "): run `trainbench platform` for utilization against the peak\n";
  return p;
}

// The platform and stack rows of this host and software in a store, as sweeps record them.
std::pair<int64_t, int64_t> store_keys(Store& store) {
  return {host_platform_id(store), store.stack_id(stack_identity())};
}

// The config of `profile`/`memory`: the positional config string, or --torchscript FILE
// with --input and --target (as `run` takes them).
struct TorchScriptArgs {
  std::string file, input, target;
};
void add_torchscript_options(CLI::App* sub, TorchScriptArgs& t) {
  sub->add_option("--torchscript", t.file,
                  "instead of a config: this TorchScript file, with --input SHAPE[,SHAPE...] "
                  "(no batch dimension) and --target classes|regression (docs/suite.md)");
  sub->add_option("--input", t.input, "with --torchscript: input shapes, e.g. 3x224x224");
  sub->add_option("--target", t.target, "with --torchscript: classes or regression");
}
Config config_of(const std::string& text, const TorchScriptArgs& t) {
  if (t.file.empty()) {
    if (!t.input.empty() || !t.target.empty())
      throw UsageError("--input and --target need --torchscript");
    if (text.empty()) throw UsageError("give a config string or --torchscript FILE");
    return parse_config(text);
  }
  if (!text.empty()) throw UsageError("give a config string or --torchscript, not both");
  std::string family;
  std::map<std::string, std::string> params;
  if (!t.input.empty()) params["input"] = t.input;
  if (!t.target.empty()) params["target"] = t.target;
  apply_torchscript_sugar(t.file, family, params);
  return make_config(family, {params.begin(), params.end()});
}

std::vector<int64_t> parse_batches(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v <= 0 || v > 1000000)
      throw UsageError("--batch " + text + ": '" + item + "' is not a batch size (1 to 1000000)");
    // Measured twice, a batch printed two identical rows and weighed twice in the fit.
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw UsageError("--batch " + text + ": batch size " + item + " is listed twice");
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace

Command add_profile(CLI::App& app) {
  struct Args {
    std::string config, trace, output, store, platform;
    TorchScriptArgs ts;
    bool json = false;
    size_t top = 15;
    double peak_gflops = 0;
    ProfileOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "profile", "Per-operator breakdown of steady-state training steps (LibTorch's profiler)");
  sub->add_option("config", a->config, "config string, e.g. fc:layers=4,nodes=1024,batch=512");
  add_torchscript_options(sub, a->ts);
  sub->add_option("--warmup", a->options.warmup_steps, "unprofiled steps first")
      ->transform(number_in(1, 100000))
      ->capture_default_str();
  sub->add_option("--steps", a->options.steps, "profiled steps")
      ->transform(number_in(1, 10000))
      ->capture_default_str();
  sub->add_option("--top", a->top, "operators to list by self time")
      ->transform(number_in(1, 100000))
      ->capture_default_str();
  sub->add_option("--trace", a->trace, "write a Chrome trace JSON (Perfetto, chrome://tracing)");
  sub->add_flag("--json", a->json, "print a versioned JSON document instead of tables");
  sub->add_option("-o,--out", a->output, "also write the JSON document to this file");
  sub->add_option("-s,--store", a->store, "also record the profile in this results store");
  sub->add_option("--platform", a->platform,
                  "platform for utilization: a registry name or file (default: this host's)");
  sub->add_option("--peak-gflops", a->peak_gflops, "peak for utilization, GFLOP/s")
      ->check(positive_number());
  sub->add_option("--seed", a->options.seed, "seed for weights and synthetic data")
      ->transform(unsigned_integer())
      ->capture_default_str();
  sub->footer(
      "Examples:\n"
      "  trainbench profile fc:layers=4,nodes=1024,input=2000,output=200,batch=512\n"
      "  trainbench profile cnn:blocks=1,filters=16,image=64,batch=8 --trace cnn.trace.json\n"
      "  trainbench profile rnn:cell=lstm,embed=256,length=20,batch=32 --top 30 --steps 10\n"
      "  trainbench profile fc:nodes=2048,batch=1024 --json -o profile.json --store runs.db\n"
      "  trainbench profile --torchscript model.pt --input 3x32x32 --target classes\n"
      "Times and FLOPs are per step. Open the trace in https://ui.perfetto.dev or "
      "chrome://tracing.\n"
      "Exit status: 0 ok, 1 the config did not run (see its status), 2 bad input.");
  return {sub, [a]() {
            const Config config = config_of(a->config, a->ts);
            check_output_file("--trace", a->trace);
            check_output_file("--out", a->output);
            if (a->peak_gflops > 0) a->options.peak_flops = a->peak_gflops * 1e9;
            a->options.platform = resolve_platform(a->platform, a->json || a->options.peak_flops);
            a->options.keep_trace = !a->trace.empty();
            std::unique_ptr<Store> store;
            if (!a->store.empty()) store = Store::open(a->store);
            if (!a->json && isatty(STDOUT_FILENO))
              std::cerr << "profiling " << config.str() << " ...\n";
            const ProfileRun run = profile_config(config, a->options);
            json r = {{"config", run.profile.config.empty() ? config.str() : run.profile.config},
                      {"status", to_string(run.status)},
                      {"error", run.error},
                      {"threads", run.threads}};
            if (run.status == Status::kOk) r["profile"] = to_json(run.profile);
            const json doc = document("trainbench.profile", {{"results", json::array({r})}});
            if (a->json)
              std::cout << doc.dump(2) << "\n";
            else if (run.status == Status::kOk)
              std::cout << format_profile(run.profile, a->top);
            else
              std::cout << "config    " << printable(r["config"].get<std::string>())
                        << "\nstatus    " << to_string(run.status) << "\nreason    " << run.error
                        << "\n";
            if (!a->output.empty()) write_file_atomically(a->output, doc.dump(2) + "\n");
            // A model that cannot be trained (a broken TorchScript file) is bad input.
            if (run.status == Status::kInvalid) {
              std::cerr << "trainbench: " << printable(run.error) << "\n";
              return 2;
            }
            if (run.status != Status::kOk) return 1;
            if (!a->trace.empty()) {
              write_file_atomically(a->trace,
                                    chrome_trace(run.trace, run.profile.config).dump() + "\n");
              if (!a->json)
                std::cout << "trace        " << printable(a->trace) << " (" << run.trace.size()
                          << " events)\n";
            }
            if (store) {
              const auto [platform, stack] = store_keys(*store);
              store->add_profile(r["profile"], platform, stack);
              if (!a->json) std::cout << "store        " << store->path() << "\n";
            }
            return 0;
          }};
}

Command add_memory(CLI::App& app) {
  struct Args {
    std::string config, batches, budget, output, store;
    TorchScriptArgs ts;
    bool json = false, timeline = false;
    MemoryOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "memory",
      "Measured memory breakdown of a training step: weights, gradients, optimizer, "
      "feature maps, workspace");
  sub->add_option("config", a->config, "config string, e.g. fc:layers=4,nodes=1024,batch=512");
  add_torchscript_options(sub, a->ts);
  sub->add_option(
      "--batch", a->batches,
      "measure at these batch sizes (comma-separated): the stacked breakdown per batch");
  sub->add_option("--budget", a->budget,
                  "memory budget, e.g. 8GiB: the largest batch that fits (with --batch)");
  sub->add_flag("--json", a->json, "print a versioned JSON document instead of tables");
  sub->add_flag("--timeline", a->timeline,
                "include the allocation timeline of the step in the JSON");
  sub->add_option("-o,--out", a->output, "also write the JSON document to this file");
  sub->add_option("-s,--store", a->store, "also record the breakdowns in this results store");
  sub->add_option("--seed", a->options.seed, "seed for weights and synthetic data")
      ->transform(unsigned_integer())
      ->capture_default_str();
  sub->footer(
      "Examples:\n"
      "  trainbench memory fc:layers=4,nodes=1024,input=2000,output=200,batch=512\n"
      "  trainbench memory --batch 32,64,128,256 --budget 8GiB cnn:blocks=2,filters=32,image=128\n"
      "  trainbench memory rnn:cell=lstm,embed=512,length=50 --batch 16,32,64 --json --timeline\n"
      "  trainbench memory fc:nodes=4096 --batch 256,512,1024 --store runs.db\n"
      "  trainbench memory --torchscript model.pt --input 3x32x32 --batch 8,16,32\n"
      "Measured by counting every allocation LibTorch makes through its CPU allocator; memory\n"
      "the BLAS or oneDNN allocate for themselves is not seen. docs/profiling.md has the details.\n"
      "Exit status: 0 ok, 1 some batch did not run (see its status), 2 bad input.");
  return {sub, [a, sub]() {
            Config config = config_of(a->config, a->ts);
            std::vector<int64_t> batches = {config.get_int("batch")};
            // An empty --batch is a bad list, as `--batch 32,,64` is, not the config's batch.
            if (!a->batches.empty() || sub->count("--batch")) batches = parse_batches(a->batches);
            std::optional<double> budget;
            if (!a->budget.empty()) budget = parse_bytes("--budget", a->budget);
            std::vector<Config> configs;
            for (int64_t b : batches) {
              Config c = config;
              c.set("batch", std::to_string(b));
              try {
                c = parse_config(c.str());  // the family's range check
              } catch (const UsageError&) {
                throw UsageError("--batch " + a->batches + ": batch=" + std::to_string(b) +
                                 " is out of range for " + config.family());
              }
              configs.push_back(c);
            }
            check_output_file("--out", a->output);
            std::unique_ptr<Store> store;
            if (!a->store.empty()) store = Store::open(a->store);
            const bool tty = isatty(STDOUT_FILENO);
            std::vector<MemoryBreakdown> measured;
            json results = json::array();
            bool all_ok = true;
            std::string invalid;  // a model that cannot be trained: bad input, status 2
            for (const auto& c : configs) {
              if (!a->json && tty) std::cerr << "measuring " << c.str() << " ...\n";
              const MemoryRun run = measure_memory(c, a->options);
              json r = {{"config", run.breakdown.config},
                        {"status", to_string(run.status)},
                        {"error", run.error}};
              if (run.status == Status::kOk) {
                r["memory"] = to_json(run.breakdown, a->timeline);
                measured.push_back(run.breakdown);
                if (!a->json && configs.size() == 1) std::cout << format_memory(run.breakdown);
                if (store) {
                  const auto [platform, stack] = store_keys(*store);
                  store->add_memory(to_json(run.breakdown, true), platform, stack);
                }
              } else {
                all_ok = false;
                if (run.status == Status::kInvalid) invalid = run.error;
                if (!a->json)
                  std::cout << "config       " << printable(c.str()) << "\nstatus       "
                            << to_string(run.status) << " (" << run.error << ")\n";
              }
              results.push_back(r);
            }
            json doc = document("trainbench.memory", {{"results", results}});
            if (configs.size() > 1 || budget) {
              const MemorySweep s = summarize(measured, budget);
              doc["summary"] = to_json(s, false);
              doc["summary"].erase("batches");
              if (!a->json) std::cout << format_memory_sweep(s);
            }
            if (a->json) std::cout << doc.dump(2) << "\n";
            if (!a->output.empty()) write_file_atomically(a->output, doc.dump(2) + "\n");
            if (!invalid.empty()) {
              std::cerr << "trainbench: " << printable(invalid) << "\n";
              return 2;
            }
            return all_ok ? 0 : 1;
          }};
}

}  // namespace tb::cli
