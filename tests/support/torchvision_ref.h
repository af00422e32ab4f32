#pragma once
// Runs a reference script under Debian's python3-torchvision and parses the one JSON object
// it prints. Absent Python or torchvision gives nullopt, so tests fall back to the numbers
// they carry.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tb::testing {

inline std::optional<nlohmann::json> torchvision_json(const std::string& script,
                                                      const std::string& args = "") {
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0) return std::nullopt;
  const std::string cmd = std::string(python) + " " + script + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0 || out.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace tb::testing
