#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>

#include "base/errors.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "cost/cost.h"
#include "jobs/cluster.h"
#include "jobs/plan.h"
#include "jobs/progress.h"
#include "jobs/sweep_runner.h"
#include "platform/host.h"
#include "report/run_table.h"
#include "spec/printable.h"
#include "spec/stack.h"
#include "spec/sweep.h"
#include "store/store.h"

namespace tb::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_sigint(int) { g_stop = true; }

}  // namespace

SweepSummary run_sweep_with_progress(const std::vector<Config>& configs, Store& store,
                                     SweepOptions o) {
  o.binary = "/proc/self/exe";
  o.stop = &g_stop;
  std::signal(SIGINT, on_sigint);
  std::signal(SIGTERM, on_sigint);
  ProgressPrinter progress(stderr, isatty(STDERR_FILENO));
  const SweepSummary s = run_sweep(configs, store, o, std::ref(progress));
  progress.finish(s);
  return s;
}

double memory_limit_bytes(double gib) {
  return gib > 0 ? gib * double(1LL << 30) : 0.9 * double(available_memory_bytes());
}

Command add_sweep(CLI::App& app) {
  struct Args {
    std::string sweep, store = "trainbench.db";
    PlanRequest plan;  // --filter, --sample, --seed, --lhs, --stratify, --order, --shard
    bool dry_run = false, list = false, rerun = false, retry_failed = false;
    bool profile = false, packages = false;
    std::vector<std::string> stacks;
    int repetitions = 0;
    double budget = 0, timeout = 0, sweep_budget = 0, memory_limit_gib = 0, merge_timeout = 0;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "sweep", "Run a grid of configs, each in its own process, into a results store");
  sub->add_option("sweep", a->sweep, "a built-in sweep name or a TOML sweep file");
  sub->add_option("-s,--store", a->store, "SQLite results store (created if missing)")
      ->capture_default_str();
  sub->add_flag("--list", a->list, "list the built-in sweeps");
  sub->add_flag("--dry-run", a->dry_run, "list the configs and their predicted cost; run nothing");
  sub->add_option("--filter", a->plan.filter,
                  "keep configs matching all of key=value, key>=value, ...");
  sub->add_option("--sample", a->plan.sample, "run a sample of N configs")
      ->check(positive_number());
  sub->add_option("--seed", a->plan.seed, "seed of --sample")
      ->transform(unsigned_integer())
      ->capture_default_str();
  auto* lhs = sub->add_flag("--lhs", a->plan.lhs,
                            "sample by Latin hypercube over the axes (default: uniform random)");
  sub->add_option("--stratify", a->plan.stratify,
                  "with --sample: spread the sample evenly over the cells of these axes, e.g. "
                  "nodes,batch (fills a heat map over them)")
      ->delimiter(',')
      ->excludes(lhs);
  sub->add_option("--order", a->plan.order, "grid (as written) or cost (cheapest first)")
      ->check(CLI::IsMember({"grid", "cost"}))
      ->capture_default_str();
  sub->add_option(
      "--shard", a->plan.shard,
      "run shard I of N (1-based): every N-th config; 'auto': I and N from mpirun/srun's "
      "environment, each rank writes STORE.shard-I-of-N.db and rank 0 merges them into STORE");
  sub->add_option(
         "--merge-timeout", a->merge_timeout,
         "with --shard auto: seconds rank 0 waits for the other shards (default: no limit)")
      ->transform(number_in(0.0, 1e9));
  sub->add_option("--budget", a->budget, "seconds of timed steps per config (default: the sweep's)")
      ->transform(number_in(0.01, 1e6));
  sub->add_option("--repetitions", a->repetitions,
                  fmt::format("measure every config in N fresh processes, interleaved (default: "
                              "the sweep file's, else {}); a resumed sweep tops up configs "
                              "stored with fewer",
                              kSweepRepetitions))
      ->transform(number_in(1, 100));
  sub->add_option("--timeout", a->timeout,
                  "seconds per config, start-up included (default 3 x budget + 60)")
      ->transform(number_in(0.1, 1e7));
  sub->add_option("--sweep-budget", a->sweep_budget,
                  "seconds for the whole sweep; re-run to resume")
      ->transform(number_in(0.1, 1e9));
  sub->add_option("--memory-limit", a->memory_limit_gib,
                  "GiB per config (default: 90% of available)")
      ->check(positive_number());
  sub->add_flag("--rerun", a->rerun,
                "run configs the store already has for this platform and stack");
  sub->add_flag("--retry-failed", a->retry_failed,
                "run again the configs recorded crashed, oom or timeout");
  sub->add_flag(
      "--profile", a->profile,
      "also profile every config that ran ok and store its per-operator profile (costs time)");
  sub->add_option(
      "--stack", a->stacks,
      "run every config under this software stack (repeatable; replaces the sweep file's stacks)");
  sub->add_flag(
      "--packages", a->packages,
      "print the Debian packages the sweep's stacks need (for scripts/setup.sh stacks) and exit");
  sub->footer(
      "Examples:\n"
      "  trainbench sweep --list\n"
      "  trainbench sweep demo --store demo.db\n"
      "  trainbench sweep fc-cpu --dry-run --order cost\n"
      "  trainbench sweep paradnn-fc --sample 200 --lhs --seed 7 --store fc.db\n"
      "  trainbench sweep paradnn-fc --sample 180 --stratify nodes,batch --store fc.db  # 2 per "
      "cell\n"
      "  trainbench sweep my-sweep.toml --filter 'nodes>=1024,batch=512' --budget 5\n"
      "  trainbench sweep paradnn-lstm --shard 3/8 --store shard3.db   # one of 8 machines\n"
      "  mpirun -n 8 trainbench sweep paradnn-lstm --shard auto --store lstm.db  # rank 0 merges\n"
      "  trainbench sweep demo --store demo.db --profile   # + per-operator profiles in the store\n"
      "  trainbench sweep stacks-fc --store stacks.db      # OpenBLAS vs BLIS vs reference BLAS\n"
      "  trainbench sweep fc-cpu --stack blas=blis-pthread --stack mode=torchscript --store s.db\n"
      "  trainbench sweep rnn-cpu --repetitions 5 --store rnn.db   # 5 processes per config\n"
      "Re-running the same command resumes: finished configs are skipped (--rerun to force).\n"
      "Sweep file format: docs/sweeps.md");
  return {sub, [a]() {
            if (a->list) {
              for (const auto& n : builtin_sweep_names()) {
                const SweepSpec s = find_sweep(n);
                std::cout << fmt::format("{:<24} {:>6} configs  {}\n", n, expand_sweep(s).size(),
                                         s.description);
              }
              return 0;
            }
            if (a->sweep.empty())
              throw UsageError("sweep: name a sweep or a file (--list shows the built-in ones)");
            const SweepSpec spec = find_sweep(a->sweep);
            std::vector<StackSpec> stacks;
            for (const auto& t : a->stacks.empty() ? spec.stacks : a->stacks)
              stacks.push_back(parse_stack(t));
            if (a->packages) {
              for (const auto& p : stack_packages(stacks)) std::cout << p << "\n";
              return 0;
            }
            for (const auto& st : stacks)
              if (st.blas != "default" && st.blas != "system" && !find_blas(st.blas).installed())
                throw UsageError("sweep: BLAS '" + st.blas + "' is not installed (Debian package " +
                                 find_blas(st.blas).package + "; run scripts/setup.sh stacks " +
                                 a->sweep + ")");
            const SweepPlan plan = plan_sweep(spec, a->plan);
            const std::vector<Config>& configs = plan.configs;
            const int shard_n = plan.shard_count, shard_i = plan.shard_index;
            if (shard_n > 1)
              std::cerr << fmt::format("shard {}/{} ({})\n", shard_i, shard_n, plan.shard_source);
            const double limit = memory_limit_bytes(a->memory_limit_gib);
            if (!plan.invalid.empty())
              std::cerr << fmt::format(
                  "sweep: {} combination{} of the grid's values {} no config and left out, "
                  "e.g. {}: {}\n",
                  plan.invalid.size(), plan.invalid.size() == 1 ? "" : "s",
                  plan.invalid.size() == 1 ? "is" : "are", printable(plan.invalid.front().config),
                  printable(plan.invalid.front().reason));
            for (const auto& note : plan.notes) std::cerr << "sweep: " << note << "\n";
            if (!plan.same_as_all_cores.empty())
              std::cerr << fmt::format(
                  "sweep: threads=0 is threads={} on this machine: {} config{} measured once, "
                  "e.g. {}\n",
                  online_cpus(), plan.same_as_all_cores.size(),
                  plan.same_as_all_cores.size() == 1 ? "" : "s",
                  printable(plan.same_as_all_cores.front()));
            if (a->dry_run) {
              std::cout << fmt::format("{:>5}  {:>12} {:>10} {:<14} {}\n", "#", "FLOP/step",
                                       "memory", "predicted", "config");
              double flops = 0;
              for (size_t i = 0; i < configs.size(); ++i) {
                const StepCost c =
                    has_cost(configs[i].family()) ? step_cost(configs[i]) : StepCost{};
                flops += c.flops();
                std::cout << fmt::format("{:>5}  {:>12} {:>10} {:<14} {}\n", i + 1,
                                         si(c.flops(), ""), bytes_iec(c.memory.total()),
                                         c.memory.total() > limit ? "oom-predicted" : "run",
                                         configs[i].str());
              }
              std::cout << fmt::format(
                  "{} configs, {} per step in all; budget {} s per config and process\n",
                  configs.size(), si(flops, "FLOP"), a->budget > 0 ? a->budget : spec.budget_s);
              return 0;
            }
            const std::string merged_store = a->store;
            if (shard_n > 1) a->store = shard_store_path(merged_store, shard_i, shard_n);
            auto store = Store::open(a->store);
            SweepOptions o;
            o.sweep_name = spec.name;
            o.budget_s = a->budget > 0 ? a->budget : spec.budget_s;
            o.timeout_s = a->timeout > 0 ? a->timeout : spec.timeout_s;
            o.target_ci = spec.target_ci;
            o.sweep_budget_s = a->sweep_budget;
            o.memory_limit = int64_t(limit);
            o.rerun = a->rerun;
            o.retry_failed = a->retry_failed;
            o.profile = a->profile;
            o.stacks = stacks;
            o.repetitions = a->repetitions > 0     ? a->repetitions
                            : spec.repetitions > 0 ? spec.repetitions
                                                   : kSweepRepetitions;
            const SweepSummary s = run_sweep_with_progress(configs, *store, o);
            if (shard_n > 1) try {
                finish_shard(merged_store, shard_i, shard_n, s, a->merge_timeout, std::cerr);
              } catch (const std::runtime_error& e) {
                std::cerr << "trainbench: " << printable(e.what()) << "\n";
                return 1;
              }
            if (!s.harness_error.empty()) {
              std::cerr << "trainbench: sweep stopped: " << s.harness_error << "\n";
              return 1;
            }
            std::cout << "store: " << printable(store->path()) << " (" << store->count_runs()
                      << " runs";
            if (a->profile) std::cout << ", " << s.profiled << " profiled";
            std::cout << ")\n";
            return s.interrupted ? 130 : 0;
          }};
}

}  // namespace tb::cli
