// `trainbench suite`: the reference models (TBD / ParaDnn real-model suite) through the
// sweep machinery: each config in its own process, per-run timeout, statuses, resumable.
#include <fmt/format.h>

#include <iostream>

#include "base/errors.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "jobs/sweep_runner.h"
#include "spec/family.h"
#include "spec/printable.h"
#include "spec/suite.h"
#include "store/store.h"

namespace tb::cli {
namespace {

std::string batches_text(const FamilySchema& s) {
  std::string out;
  for (int64_t b : s.batch_sweep) out += (out.empty() ? "" : ",") + std::to_string(b);
  return out.empty() ? "-" : out;
}

}  // namespace

Command add_suite(CLI::App& app) {
  struct Args {
    std::string models, store = "suite.db";
    bool batch_sweep = false, list = false, dry_run = false, rerun = false, retry_failed = false,
         profile = false;
    double budget = 10, timeout = 0, sweep_budget = 0, memory_limit_gib = 0, target_ci = 0.01;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "suite", "Run the reference models (TBD/ParaDnn real-model suite) into a results store");
  sub->add_flag("--list", a->list,
                "list the suite: model, task, unit, default config, batch sweep");
  sub->add_flag("--batch-sweep", a->batch_sweep,
                "run each model over its batch sweep (TBD Figs. 4-6) instead of its default batch");
  sub->add_option("--models", a->models,
                  "comma-separated models to run (default: every reference model); a generated "
                  "family named here runs at its defaults");
  sub->add_option("-s,--store", a->store, "SQLite results store (created if missing)")
      ->capture_default_str();
  sub->add_flag("--dry-run", a->dry_run, "list the configs; run nothing");
  sub->add_option("--budget", a->budget, "seconds of timed steps per config")
      ->transform(number_in(0.01, 1e6))
      ->capture_default_str();
  sub->add_option("--timeout", a->timeout,
                  "seconds per config, start-up included (default 3 x budget + 60)")
      ->transform(number_in(0.1, 1e7));
  sub->add_option("--target-ci", a->target_ci,
                  "stop a config when its 95% CI half-width is within this fraction of the mean")
      ->transform(number_in(1e-4, 0.5))
      ->capture_default_str();
  sub->add_option("--sweep-budget", a->sweep_budget,
                  "seconds for the whole suite; re-run to resume")
      ->transform(number_in(0.1, 1e9));
  sub->add_option("--memory-limit", a->memory_limit_gib,
                  "GiB per config (default: 90% of available)")
      ->check(positive_number());
  sub->add_flag("--rerun", a->rerun,
                "run configs the store already has for this platform and stack");
  sub->add_flag("--retry-failed", a->retry_failed,
                "run again the configs recorded crashed, oom or timeout");
  sub->add_flag("--profile", a->profile, "also profile every config that ran ok (costs time)");
  sub->footer(
      "Examples:\n"
      "  trainbench suite --list\n"
      "  trainbench suite --store suite.db                      # every model at its default "
      "config\n"
      "  trainbench suite --batch-sweep --store suite.db        # throughput vs batch (TBD Figs. "
      "4-6)\n"
      "  trainbench suite --models resnet50,transformer --timeout 600 --store suite.db\n"
      "  trainbench suite --batch-sweep --dry-run\n"
      "  trainbench report suite.db demo.db -o report.html     # stars among the generated models\n"
      "Re-running the same command resumes: finished configs are skipped (--rerun to force).\n"
      "More: docs/suite.md");
  return {sub, [a, sub]() {
            const std::vector<std::string> models = split_models(a->models);
            // Given but naming nothing: not "every model", which leaving it out means.
            if (models.empty() && sub->count("--models"))
              throw UsageError("--models '" + a->models + "': no model named");
            if (a->list) {
              if (sub->count("--models"))
                throw UsageError("--list lists every model: it takes no --models");
              const auto refs = reference_families();
              std::cout << fmt::format("{:<16} {:<28} {:<8} {:<28} {}\n", "model", "task", "unit",
                                       "batch sweep", "default config");
              for (const auto* s : refs)
                std::cout << fmt::format("{:<16} {:<28} {:<8} {:<28} {}\n", s->name, s->task,
                                         s->throughput_unit, batches_text(*s),
                                         make_config(s->name, {}).str());
              if (refs.empty()) std::cout << "(no reference models in this build)\n";
              // The default suite runs the named configs too, after the reference models.
              for (const auto* n : named_configs())
                std::cout << fmt::format("{:<16} {:<28} {:<8} {:<28} {}\n", n->name,
                                         "named config of " + parse_config(n->config).family(), "-",
                                         "-", n->config);
              return 0;
            }
            const SweepSpec spec = suite_sweep(models, a->batch_sweep);
            const std::vector<Config> configs = expand_sweep(spec);
            if (a->dry_run) {
              for (const auto& c : configs) std::cout << c.str() << "\n";
              std::cout << configs.size() << " configs\n";
              return 0;
            }
            if (configs.empty())
              throw UsageError(
                  "suite: no reference models in this build (name families with --models)");
            auto store = Store::open(a->store);
            SweepOptions o;
            o.sweep_name = spec.name;
            o.budget_s = a->budget;
            o.timeout_s = a->timeout;
            o.target_ci = a->target_ci;
            o.sweep_budget_s = a->sweep_budget;
            o.memory_limit = int64_t(memory_limit_bytes(a->memory_limit_gib));
            o.rerun = a->rerun;
            o.retry_failed = a->retry_failed;
            o.profile = a->profile;
            const SweepSummary s = run_sweep_with_progress(configs, *store, o);
            if (!s.harness_error.empty()) {
              std::cerr << "trainbench: suite stopped: " << s.harness_error << "\n";
              return 1;
            }
            std::cout << "store: " << printable(store->path()) << " (" << store->count_runs()
                      << " runs)\n";
            return s.interrupted ? 130 : 0;
          }};
}

}  // namespace tb::cli
