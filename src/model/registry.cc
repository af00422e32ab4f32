#include <fmt/format.h>

#include <map>

#include "base/errors.h"
#include "model/workload.h"

namespace tb {
namespace {
std::map<std::string, WorkloadBuilder>& builders() {
  static std::map<std::string, WorkloadBuilder> b;
  return b;
}
}  // namespace

void register_builder(const std::string& family, WorkloadBuilder builder) {
  builders()[family] = std::move(builder);
}

std::vector<std::string> families_with_builders() {
  std::vector<std::string> out;
  for (const auto& [name, b] : builders()) out.push_back(name);
  return out;
}

std::unique_ptr<Workload> build_workload(const Config& config) {
  auto it = builders().find(config.family());
  if (it == builders().end())
    throw UsageError(fmt::format("no model builder for family '{}'", config.family()));
  return it->second(config);
}

torch::Dtype dtype_of(const Config& config) {
  const std::string& d = config.get("dtype");
  if (d == "fp32") return torch::kFloat32;
  if (d == "bf16") return torch::kBFloat16;
  throw UsageError(fmt::format("{}: dtype={} has no torch type", config.family(), d));
}

}  // namespace tb
