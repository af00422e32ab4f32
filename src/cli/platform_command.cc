#include <fmt/format.h>

#include <iostream>

#include "base/errors.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "platform/host.h"
#include "platform/registry.h"
#include "report/platform_table.h"
#include "runner/characterize.h"
#include "runner/threads.h"

namespace tb::cli {

Command add_platform(CLI::App& app) {
  struct Args {
    bool refresh = false, json = false, list = false, quick = false;
    std::string spec;
    std::vector<double> at;
    int threads = 0;
    CharacterizeOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* sub =
      app.add_subcommand("platform", "Describe and measure this machine, or show a known platform");
  sub->add_flag("--refresh", a->refresh, "measure again even if a fresh cached description exists");
  sub->add_flag("--json", a->json, "print the description as JSON");
  sub->add_flag("--list", a->list, "list the registry of known platforms");
  sub->add_option("--spec", a->spec, "show a known platform by name, or a description file");
  sub->add_option("--at", a->at, "attainable FLOP/s at these arithmetic intensities (FLOP/byte)")
      ->delimiter(',')
      ->check(positive_number());
  sub->add_option("--threads", a->threads, "threads for the measurement (default: all cores)")
      ->transform(number_in(0, 4096));
  sub->add_option("--fma-units", a->options.fma_units,
                  "FMA units per core for the theoretical peak; 0: from the CPU's "
                  "microarchitecture (2 where trainbench does not know it)")
      ->transform(number_in(0, 4))
      ->capture_default_str();
  sub->add_flag("--quick", a->quick, "fewer sizes and trials, no working-set sweep (for tests)");
  sub->footer(
      "Examples:\n"
      "  trainbench platform                       # this host: cached, or measured (1-2 min)\n"
      "  trainbench platform --refresh --json      # measure again, print JSON\n"
      "  trainbench platform --list\n"
      "  trainbench platform --spec tpu-v2-board --at 10,75,200\n"
      "  trainbench platform --spec ./my-accelerator.json\n"
      "The cache lives in ~/.cache/trainbench (TRAINBENCH_CACHE_DIR overrides) and is re-measured\n"
      "when the CPU, memory, LibTorch or BLAS change; --quick and --threads N measure every\n"
      "time and are never cached. Your own platforms: put description files in\n"
      "~/.config/trainbench/platforms or TRAINBENCH_PLATFORMS; format in docs/platforms.md.");
  return {
      sub, [a, sub]() {
        if (a->list) {
          // The list is every platform as it is: an option for one of them or for a
          // measurement would be ignored.
          for (const char* o : {"--spec", "--at", "--refresh", "--threads", "--quick"})
            if (sub->count(o))
              throw UsageError(std::string("--list takes no ") + o +
                               " (--spec NAME shows one platform)");
          std::vector<std::string> problems;
          const auto ps = list_platforms(&problems);
          for (const auto& p : problems) std::cerr << "platform: skipped " << p << "\n";
          if (a->json) {
            nlohmann::json j = nlohmann::json::array();
            for (const auto& p : ps) j.push_back(to_json(p));
            std::cout << j.dump(2) << "\n";
          } else {
            std::cout << format_platform_list(ps);
          }
          return 0;
        }
        PlatformDescription p;
        if (!a->spec.empty()) {
          p = find_platform(a->spec);
        } else {
          const std::string path = platform_cache_path();
          // The cache holds the full all-core characterization: it neither answers a --quick
          // or --threads request (a one-thread peak is not the all-core one) nor is replaced
          // by one.
          const bool whole_host = !a->quick && (a->threads == 0 || a->threads == online_cpus());
          std::string why = "--quick or --threads: the cache holds the whole host";
          auto cached = a->refresh || !whole_host
                            ? std::nullopt
                            : load_cached_platform(path, host_fingerprint(), &why);
          if (cached) {
            p = *cached;
            std::cerr << "platform: cached description " << path
                      << " (--refresh to measure again)\n";
          } else {
            if (!a->refresh) std::cerr << "platform: measuring (" << why << ")\n";
            apply_threads(a->threads);
            if (a->quick) {
              a->options.gemm_sizes = {256, 512};
              a->options.gemm_rows = {64};
              a->options.gemm_rows_sizes = {256, 512};
              a->options.conv_grid_sides = {4, 16};
              a->options.conv_grid_channels = {16, 64};
              a->options.trials = 3;
              a->options.trial_s = 0.05;
              a->options.sweep = false;
              a->options.stream_elements = 1 << 22;  // 32 MiB arrays: not a DRAM figure
            }
            a->options.progress = [](const std::string& s) {
              std::cerr << "platform: " << s << "\n";
            };
            p = characterize_host(a->options);
            // Only the all-core characterization stands for the host; a --threads or
            // --quick measurement is printed, never cached.
            if (whole_host)
              save_cached_platform(path, p);
            else
              std::cerr << "platform: not cached (--quick or --threads measure part of the host)\n";
          }
        }
        if (a->json)
          std::cout << to_json(p).dump(2) << "\n";
        else
          std::cout << format_platform(p);
        if (!a->at.empty() && !a->json) std::cout << "\n" << format_roofline(p, a->at);
        return 0;
      }};
}

}  // namespace tb::cli
