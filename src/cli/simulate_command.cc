#include <fmt/format.h>

#include <iostream>
#include <map>

#include "analysis/published.h"
#include "analysis/runs.h"
#include "analysis/validation.h"
#include "base/errors.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "platform/registry.h"
#include "record/json.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"

namespace tb::cli {

Command add_simulate(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string platform, format, layout = "nhwc";
    bool json = false, validate = false, explain = false;
    std::string published;
    size_t top = 10;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Predict a training step's time on a described accelerator, or validate the "
      "prediction against measured runs");
  sub->add_option("inputs", a->inputs, "config strings (or, with --validate, results stores)");
  sub->add_option("--platform", a->platform,
                  "platform name or description file (with --validate: replaces every stored "
                  "description)");
  sub->add_option("--format", a->format,
                  "number format the accelerator computes and stores in (default: the widest "
                  "of the config's numerics= weights, activations and errors formats where all "
                  "three are set, else its dtype): fp32, bf16, fp16, e4m3, int8, mxfp8_e4m3, ...; "
                  "or a mixed-precision recipe: amp-fp16, amp-bf16, tf32, and FP8 as GPUs train "
                  "it: amp-fp8@current, amp-fp8@delayed (Transformer Engine's casts), "
                  "amp-fp8-eager@current (PyTorch's eager casts)");
  sub->add_option("--layout", a->layout,
                  "activations' memory layout: nhwc (channels last) or nchw (PyTorch's default: "
                  "on a GPU, tensor-core (TF32, 16- and 8-bit) convolutions pay cuDNN's transposes "
                  "to NHWC and back)")
      ->check(CLI::IsMember({"nhwc", "nchw"}))
      ->capture_default_str();
  sub->add_flag("--validate", a->validate,
                "predict every ok run of the stores from its platform's stored description and "
                "report the error distribution");
  sub->add_option(
      "--validate-published", a->published,
      "predict every row of a CSV of published single-device training throughputs "
      "(columns config, platform, format, batch, throughput, unit, source; shipped: "
      "data/published/training-throughput.csv, measured ones: data/measured/) and report the "
      "error per row and platform");
  sub->add_option("--top", a->top, "layers to list")
      ->transform(unsigned_integer())
      ->capture_default_str();
  sub->add_flag("--explain", a->explain,
                "add why: the step by layer class and bound, the peaks, efficiency and array "
                "utilization used, and where they come from");
  sub->add_flag("--json", a->json, "JSON instead of text");
  sub->footer(
      "Examples:\n"
      "  trainbench simulate fc:layers=4,nodes=1024,batch=512 --platform tpu-v2-board\n"
      "  trainbench simulate cnn:block=residual,filters=64,image=224,batch=64 "
      "--platform example-systolic-accelerator --format e4m3 --json\n"
      "  trainbench simulate --validate out/demo.db\n"
      "  trainbench simulate --validate out/demo.db --platform ./my-host.json --json\n"
      "  trainbench simulate resnet50:batch=256 --platform a100-sxm4-80gb --format amp-fp16 "
      "--explain\n"
      "  trainbench simulate resnet50:batch=1280 --platform h100-sxm5-80gb --format amp-fp16 "
      "--layout nchw --explain\n"
      "  trainbench simulate gpt:layers=12,d_model=768,heads=12,seq=1024,vocab=50304,batch=8 "
      "--platform h200-sxm-141gb --format amp-fp8@current\n"
      "  trainbench simulate --validate-published data/published/training-throughput.csv\n"
      "  trainbench simulate --validate-published data/measured/training-throughput.csv\n"
      "Model and its conventions: docs/numerics.md (\"Simulation phase\").");
  return {sub, [a]() {
            auto doc = [](const char* kind, nlohmann::json results) {
              return document(kind, {{"results", std::move(results)}});
            };
            // A validation, as JSON under `kind` or as the given text.
            auto print = [&](const std::vector<sim::Validation>& vs, const char* kind,
                             std::string (*text)(const std::vector<sim::Validation>&)) {
              if (!a->json) {
                std::cout << text(vs);
                return;
              }
              nlohmann::json r = nlohmann::json::array();
              for (const auto& v : vs) r.push_back(sim::to_json(v));
              std::cout << doc(kind, r).dump(2) << "\n";
            };
            if (!a->published.empty()) {
              if (a->validate || !a->format.empty() || !a->platform.empty() || !a->inputs.empty() ||
                  a->layout != "nhwc")
                throw UsageError(
                    "--validate-published takes no configs, --validate, --format, --platform or "
                    "--layout: each row names its own");
              const auto vs = sim::validate_published(sim::read_published(a->published));
              print(vs, "trainbench.simulate.published", sim::format_published);
              return 0;
            }
            if (a->inputs.empty())
              throw UsageError("simulate: give configs (or --validate STORES)");
            if (a->validate) {
              if (!a->format.empty())
                throw UsageError("--format does not apply to --validate (runs keep their dtype)");
              if (a->layout != "nhwc")
                throw UsageError("--layout does not apply to --validate (runs keep their layout)");
              std::optional<PlatformDescription> d;
              if (!a->platform.empty()) d = find_platform(a->platform);
              const auto vs = sim::validate(load_runs(a->inputs), d);
              // Nothing validated is not a result: a script must not read it as one.
              if (vs.empty())
                throw UsageError(
                    "no platform of the store(s) has a description: nothing to validate (give "
                    "--platform NAME|FILE, or run `trainbench platform` before the runs)");
              print(vs, "trainbench.simulate.validation", sim::format_validation);
              return 0;
            }
            if (a->platform.empty()) throw UsageError("--platform is required (a name or a file)");
            const PlatformDescription p = find_platform(a->platform);
            nlohmann::json results = nlohmann::json::array();
            // How wrong a prediction on this platform and in this format has been (shipped
            // published and measured rows): once per format.
            std::map<std::string, std::string> validation;
            for (const auto& text : a->inputs) {
              sim::SimOptions o;
              o.layout = a->layout;
              const sim::Simulation s = sim::simulate_config(p, parse_config(text), a->format, o);
              auto [it, fresh] = validation.try_emplace(s.format.name);
              if (fresh) it->second = sim::validation_phrase(p.name, s.format.name);
              if (a->json) {
                results.push_back(sim::to_json(s, a->top));
                results.back()["validation"] = it->second;
                if (a->explain) results.back()["explain"] = sim::explanation_json(s, p);
              } else {
                std::cout << "validation: " << it->second << "\n";
                std::cout << sim::format_simulation(s, a->top) << "\n";
                if (a->explain) std::cout << sim::format_explanation(s, p) << "\n";
              }
            }
            if (a->json) std::cout << doc("trainbench.simulate", results).dump(2) << "\n";
            return 0;
          }};
}

}  // namespace tb::cli
