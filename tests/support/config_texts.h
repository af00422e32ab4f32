#pragma once
// Configs as their canonical texts, for tests that compare lists of configs.
#include <string>
#include <vector>

#include "spec/config.h"

namespace tb::testing {

inline std::vector<std::string> config_texts(const std::vector<Config>& configs) {
  std::vector<std::string> out;
  for (const auto& c : configs) out.push_back(c.str());
  return out;
}

}  // namespace tb::testing
