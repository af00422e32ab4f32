#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tb {

class Config;

// One hyperparameter of a workload family. Integer parameters carry a range that
// rejects absurd values at parse time; choice parameters carry their allowed words.
struct ParamSpec {
  std::string name;
  std::string help;
  std::string default_value;         // empty: the parameter is required
  int64_t min = 1;                   // integers only
  int64_t max = 0;                   // integers only
  std::vector<std::string> choices;  // non-empty: a choice parameter
  // Left out of the config text at its default: for parameters added after results were
  // stored, so those results keep the text (and identity) they were stored under.
  bool omit_default = false;
  // Non-empty: a text parameter (a file path, a shape list). It returns the value's
  // canonical text or throws UsageError; the text cannot hold ',' (the config separator).
  std::function<std::string(const std::string&)> text;
  bool is_choice() const { return !choices.empty(); }
  bool is_text() const { return bool(text); }
};

// What a family is called and which parameters it takes, in canonical order.
struct FamilySchema {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::string example;  // a complete config string, used in --help
  // Reference models (the TBD / ParaDnn real-model suite) name their task, e.g. "image
  // classification"; generated ParaDnn families leave it empty.
  std::string task;
  // What one unit of throughput is: "examples" for generated families, "images",
  // "tokens", "audio_s" or "frames" for reference models (Workload::units_per_step).
  std::string throughput_unit = "examples";
  // The batch sizes `trainbench suite --batch-sweep` runs (TBD Figs. 4-6, 8).
  std::vector<int64_t> batch_sweep;
  // The family contract (tests/family_contract_test.cc) runs this small, complete config for
  // every registered family: round trip, parameters against the built module, forward GEMM and
  // convolution FLOPs against the profiler, weights/gradients/optimizer bytes against the
  // memory estimate, and activation-point coverage. A family without one fails the contract.
  std::string contract;
  // Clauses of the contract this family cannot run, each with the reason; the test skips and
  // prints them. Clauses: cost (has a cost description), parameters, forward_flops, memory,
  // activation_points.
  std::map<std::string, std::string> exemptions;
  // Checks between parameters and defaults that depend on others (e.g. a width derived from
  // the model width), run by make_config once every value is in place: throws UsageError
  // naming the field, or sets derived values with Config::set so the canonical text holds
  // them. Empty: none.
  std::function<void(Config&)> finalize;
  bool is_reference() const { return !task.empty(); }
  const ParamSpec* find(const std::string& param) const;
};

// The parameters every family shares, appended after the family's own.
// The optimizer defaults to ParaDnn's RMSprop; reference models pass what they are
// trained with (e.g. "momentum" for ResNet-50, "adam" for the Transformer).
std::vector<ParamSpec> common_params(int64_t default_batch,
                                     const std::string& default_optimizer = "rmsprop");

void register_family_schema(FamilySchema schema);
const FamilySchema* find_family_schema(const std::string& name);
std::vector<const FamilySchema*> family_schemas();  // sorted by name

// A named config (`gpt2-small`): a published model written as one of a family's configs,
// usable wherever a config string is. Registered beside the family's schema.
struct NamedConfig {
  std::string name, config, summary;
  std::string source;  // where its published figures come from
};
void register_named_config(NamedConfig named);
const NamedConfig* find_named_config(const std::string& name);
std::vector<const NamedConfig*> named_configs();  // sorted by name

}  // namespace tb
