#include <iostream>

#include "analysis/tta.h"
#include "base/errors.h"
#include "cli/commands.h"
#include "platform/registry.h"
#include "record/json.h"

namespace tb::cli {

Command add_tta(CLI::App& app) {
  struct Args {
    std::vector<std::string> stores;
    std::string platform, baseline;
    std::vector<std::string> run_as;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "tta", "Time to accuracy on an accelerator: emulated iterations x simulated step time");
  sub->add_option("--store", a->stores, "results store(s) holding `emulate --store` results")
      ->required();
  sub->add_option("--platform", a->platform, "the accelerator: a platform name or file")
      ->required();
  sub->add_option("--baseline", a->baseline,
                  "the variant to compare against: its number or policy text (default: the "
                  "fp32 variant of each model and target)");
  sub->add_option("--run-as", a->run_as,
                  "VARIANT=FORMAT: simulate that variant's step (its number or policy text) in "
                  "FORMAT instead of its emulated compute format, as the accelerator would train "
                  "it (e.g. 1=amp-bf16 2=amp-fp8@current on a GPU); repeatable");
  sub->add_flag("--json", a->json, "JSON instead of text");
  sub->footer(
      "Examples:\n"
      "  trainbench emulate --seeds 5 --store tta.db\n"
      "  trainbench emulate --all e4m3 --errors e5m2 --loss-scale dynamic --seeds 5 --store "
      "tta.db\n"
      "  trainbench tta --store tta.db --platform example-systolic-accelerator\n"
      "  trainbench tta --store tta.db --platform tpu-v2-board --baseline 1 --json\n"
      "  trainbench tta --store tta.db --platform h200-sxm-141gb --run-as 1=amp-bf16 "
      "--run-as 2=amp-fp8@current\n"
      "A variant whose seeds did not all reach the target is \"not reached\", never a number.");
  return {sub, [a]() {
            const PlatformDescription p = find_platform(a->platform);
            const auto emulations = load_emulations(a->stores);  // the result points into it
            if (emulations.empty())
              throw UsageError(
                  "no emulation results in the store(s): nothing to time (run `trainbench "
                  "emulate --store STORE` first)");
            const TtaResult r = time_to_accuracy(emulations, p, a->baseline, a->run_as);
            if (a->json)
              std::cout << document("trainbench.tta", {{"results", to_json(r)}}).dump(2) << "\n";
            else
              std::cout << format_tta(r);
            return 0;
          }};
}

}  // namespace tb::cli
