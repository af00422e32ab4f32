#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "jobs/sweep_runner.h"

namespace tb::cli {

// Each subcommand adds itself to the app and returns the action to run when chosen.
using Action = std::function<int()>;
struct Command {
  CLI::App* sub;
  Action action;
};
Command add_run(CLI::App& app);
Command add_cost(CLI::App& app);
Command add_families(CLI::App& app);
Command add_platform(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_merge(CLI::App& app);
Command add_export(CLI::App& app);
Command add_analyze(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_report(CLI::App& app);
Command add_profile(CLI::App& app);   // profile_command.cc
Command add_memory(CLI::App& app);    // profile_command.cc
Command add_quantize(CLI::App& app);  // numerics_commands.cc
Command add_formats(CLI::App& app);   // numerics_commands.cc
Command add_emulate(CLI::App& app);   // emulate_command.cc
Command add_simulate(CLI::App& app);  // simulate_command.cc
Command add_tta(CLI::App& app);       // tta_command.cc
Command add_suite(CLI::App& app);     // suite_command.cc

// `--torchscript FILE` (run, profile, memory): the torchscript family with path=FILE made
// absolute, so the printed config re-runs from any directory; `--input 3x8x8,16` lists its
// inputs with ',' on the command line and '+' in the config.
// What `sweep` and `suite` share once the configs are known (sweep_command.cc): each config
// run in its own process into the store, progress on stderr, SIGINT/SIGTERM stopping after
// the running config. Sets o.binary and o.stop.
SweepSummary run_sweep_with_progress(const std::vector<Config>& configs, Store& store,
                                     SweepOptions o);
// `--memory-limit GIB`, or 90% of the memory available now when it is 0.
double memory_limit_bytes(double gib);

void apply_torchscript_sugar(const std::string& file, std::string& family,
                             std::map<std::string, std::string>& params);

}  // namespace tb::cli
