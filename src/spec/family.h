#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

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
  bool is_choice() const { return !choices.empty(); }
};

// What a family is called and which parameters it takes, in canonical order.
struct FamilySchema {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::string example;  // a complete config string, used in --help
  const ParamSpec* find(const std::string& param) const;
};

// The parameters every family shares, appended after the family's own.
std::vector<ParamSpec> common_params(int64_t default_batch);

void register_family_schema(FamilySchema schema);
const FamilySchema* find_family_schema(const std::string& name);
std::vector<const FamilySchema*> family_schemas();  // sorted by name

}  // namespace tb
