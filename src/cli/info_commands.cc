#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cost/cost.h"
#include "record/json.h"
#include "report/run_table.h"
#include "spec/config.h"
#include "spec/printable.h"

namespace tb::cli {

Command add_cost(CLI::App& app) {
  struct Args {
    std::vector<std::string> configs;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("cost", "Print what a config asks of the hardware (no run)");
  sub->add_option("config", a->configs, "config strings")->required();
  sub->add_flag("--json", a->json, "JSON instead of a table");
  sub->footer(
      "Examples:\n"
      "  trainbench cost fc:layers=4,nodes=1024,batch=512\n"
      "  trainbench cost cnn:block=residual,blocks=2,filters=32,image=224,batch=64 --json\n"
      "Conventions (FLOP = 2 x MAC, BN, pooling, RNN gates): docs/cost-model.md");
  return {sub, [a]() {
            nlohmann::json docs = nlohmann::json::array();
            for (const auto& text : a->configs) {
              const Config c = parse_config(text);
              const StepCost cost = step_cost(c);
              if (a->json) {
                auto j = to_json(cost, true);
                j["config"] = c.str();
                docs.push_back(j);
              } else {
                std::cout << printable(c.str()) << "\n" << format_cost_table(cost) << "\n";
              }
            }
            if (a->json)
              std::cout << document("trainbench.cost", {{"results", docs}}).dump(2) << "\n";
            return 0;
          }};
}

Command add_families(CLI::App& app) {
  auto* sub = app.add_subcommand("families", "List workload families and their parameters");
  sub->footer(
      "Examples:\n"
      "  trainbench families\n"
      "  trainbench cost gpt2-small          # a named config, wherever a config goes\n"
      "  trainbench run gpt:layers=2,d_model=128,heads=4,seq=64,vocab=512,batch=4 --budget 5");
  return {sub, []() {
            for (const auto* s : family_schemas()) {
              std::cout << fmt::format("{}: {}\n  example: {}\n", s->name, s->summary, s->example);
              for (const auto& p : s->params) {
                std::string range = p.is_choice() ? fmt::format("{}", fmt::join(p.choices, "|"))
                                    : p.is_text() ? "text"
                                    : p.name == "device" ? "cpu|cuda|cuda:N"
                                                         : fmt::format("{}..{}", p.min, p.max);
                std::cout << fmt::format("  {:<10} {:<28} default {:<10} {}\n", p.name, range,
                                         p.default_value, p.help);
              }
            }
            std::cout << "\nNamed configs (use the name wherever a config goes):\n";
            for (const auto* n : named_configs())
              std::cout << fmt::format("  {:<16} {}\n  {:<16} = {}\n", n->name, n->summary, "",
                                       parse_config(n->config).str());
            return 0;
          }};
}

}  // namespace tb::cli
