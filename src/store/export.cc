#include "store/export.h"

#include <set>

namespace tb {
namespace {

std::vector<std::string> columns(const std::vector<nlohmann::json>& rows) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& r : rows)
    for (const auto& [k, v] : r.items())
      if (seen.insert(k).second) out.push_back(k);
  return out;
}

}  // namespace

std::string csv_field(const nlohmann::json& v) {
  if (v.is_null()) return "";
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string export_csv(Store& store) {
  const auto rows = store.runs();
  const auto cols = columns(rows);
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < cols.size(); ++i)
      out += (i ? "," : "") + csv_field(r.contains(cols[i]) ? r[cols[i]] : nlohmann::json());
    out += "\n";
  }
  return out;
}

std::string export_json(Store& store) {
  auto rows = store.runs();
  for (auto& r : rows)
    if (r.contains("step_times") && r["step_times"].is_string())
      r["step_times"] = nlohmann::json::parse(r["step_times"].get<std::string>());
  return nlohmann::json(rows).dump() + "\n";
}

}  // namespace tb
