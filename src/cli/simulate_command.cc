#include <fmt/format.h>

#include <iostream>

#include "analysis/runs.h"
#include "analysis/validation.h"
#include "base/errors.h"
#include "cli/commands.h"
#include "platform/registry.h"
#include "record/json.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"

namespace tb::cli {

Command add_simulate(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string platform, format;
    bool json = false, validate = false;
    size_t top = 10;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Predict a training step's time on a described accelerator, or validate the "
      "prediction against measured runs");
  sub->add_option("inputs", a->inputs, "config strings (or, with --validate, results stores)")
      ->required();
  sub->add_option("--platform", a->platform,
                  "platform name or description file (with --validate: replaces every stored "
                  "description)");
  sub->add_option("--format", a->format,
                  "number format the accelerator computes and stores in (default: the widest "
                  "of the config's numerics= weights, activations and errors formats where all "
                  "three are set, else its dtype): fp32, bf16, fp16, e4m3, int8, mxfp8_e4m3, ...");
  sub->add_flag("--validate", a->validate,
                "predict every ok run of the stores from its platform's stored description and "
                "report the error distribution");
  sub->add_option("--top", a->top, "layers to list")->capture_default_str();
  sub->add_flag("--json", a->json, "JSON instead of text");
  sub->footer(
      "Examples:\n"
      "  trainbench simulate fc:layers=4,nodes=1024,batch=512 --platform tpu-v2-board\n"
      "  trainbench simulate cnn:block=residual,filters=64,image=224,batch=64 "
      "--platform example-systolic-accelerator --format e4m3 --json\n"
      "  trainbench simulate --validate out/demo.db\n"
      "  trainbench simulate --validate out/demo.db --platform ./my-host.json --json\n"
      "Model and its conventions: docs/numerics.md (\"Simulation phase\").");
  return {sub, [a]() {
            auto doc = [](const char* kind, nlohmann::json results) {
              return document(kind, {{"results", std::move(results)}});
            };
            if (a->validate) {
              if (!a->format.empty())
                throw UsageError("--format does not apply to --validate (runs keep their dtype)");
              std::optional<PlatformDescription> d;
              if (!a->platform.empty()) d = find_platform(a->platform);
              const auto vs = sim::validate(load_runs(a->inputs), d);
              if (a->json) {
                nlohmann::json r = nlohmann::json::array();
                for (const auto& v : vs) r.push_back(sim::to_json(v));
                std::cout << doc("trainbench.simulate.validation", r).dump(2) << "\n";
              } else {
                std::cout << sim::format_validation(vs);
              }
              return 0;
            }
            if (a->platform.empty()) throw UsageError("--platform is required (a name or a file)");
            const PlatformDescription p = find_platform(a->platform);
            nlohmann::json results = nlohmann::json::array();
            for (const auto& text : a->inputs) {
              const sim::Simulation s = sim::simulate_config(p, parse_config(text), a->format);
              if (a->json)
                results.push_back(sim::to_json(s, a->top));
              else
                std::cout << sim::format_simulation(s, a->top) << "\n";
            }
            if (a->json) std::cout << doc("trainbench.simulate", results).dump(2) << "\n";
            return 0;
          }};
}

}  // namespace tb::cli
