#include "spec/config.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <set>

#include "base/errors.h"

namespace tb {
namespace {

std::string known_families() {
  std::string out;
  for (const auto* s : family_schemas()) out += (out.empty() ? "" : ", ") + s->name;
  std::string named;
  for (const auto* n : named_configs()) named += (named.empty() ? "" : ", ") + n->name;
  return named.empty() ? out : out + "; named configs: " + named;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "|") + s;
  return out;
}

// Canonical device text ("cuda:00" -> "cuda:0"), or empty when invalid.
std::string canonical_device(const std::string& v) {
  if (v == "cpu" || v == "cuda") return v;
  if (v.rfind("cuda:", 0) != 0 || v.size() == 5 || v.size() > 8 ||
      v.find_first_not_of("0123456789", 5) != std::string::npos)
    return "";
  const int index = std::stoi(v.substr(5));
  return index < 64 ? "cuda:" + std::to_string(index) : "";
}

// Canonical text of one value, or a UsageError naming family, field and value.
std::string check_value(const FamilySchema& schema, const ParamSpec& p, const std::string& raw) {
  const std::string where = fmt::format("{}: {}={}", schema.name, p.name, raw);
  if (raw.empty()) throw UsageError(fmt::format("{}: empty value for '{}'", schema.name, p.name));
  if (p.is_choice()) {
    for (const auto& c : p.choices)
      if (c == raw) return raw;
    throw UsageError(fmt::format("{}: expected one of {}", where, join(p.choices)));
  }
  if (p.is_text()) {
    if (raw.find(',') != std::string::npos)
      throw UsageError(fmt::format("{}: ',' cannot appear in a config value", where));
    return p.text(raw);
  }
  if (p.name == "device") {
    const std::string device = canonical_device(raw);
    if (device.empty())
      throw UsageError(fmt::format("{}: expected cpu, cuda or cuda:N (N < 64)", where));
    return device;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(raw.c_str(), &end, 10);
  if (end == raw.c_str() || *end != '\0')
    throw UsageError(fmt::format("{}: not an integer", where));
  if (errno == ERANGE || v < p.min || v > p.max)
    throw UsageError(fmt::format("{}: out of range [{}, {}]", where, p.min, p.max));
  return std::to_string(v);  // canonical: no leading zeros or '+'
}

}  // namespace

const FamilySchema& Config::schema() const {
  const FamilySchema* s = find_family_schema(family_);
  if (!s) throw UsageError(fmt::format("unknown family '{}'", family_));
  return *s;
}

bool Config::has(const std::string& key) const {
  for (const auto& [k, v] : values_)
    if (k == key) return true;
  return false;
}

const std::string& Config::get(const std::string& key) const {
  for (const auto& [k, v] : values_)
    if (k == key) return v;
  throw UsageError(fmt::format("{}: no parameter '{}'", family_, key));
}

int64_t Config::get_int(const std::string& key) const { return std::stoll(get(key)); }

void Config::set(const std::string& key, const std::string& value) {
  const FamilySchema& s = schema();
  const ParamSpec* p = s.find(key);
  if (!p) throw UsageError(fmt::format("{}: unknown parameter '{}'", family_, key));
  std::string canonical = check_value(s, *p, value);
  for (auto& [k, v] : values_)
    if (k == key) v = canonical;
}

std::string Config::str() const {
  std::string out = family_ + ":";
  bool first = true;
  const FamilySchema* s = find_family_schema(family_);
  for (const auto& [k, v] : values_) {
    const ParamSpec* p = s ? s->find(k) : nullptr;
    if (p && p->omit_default && v == p->default_value) continue;
    out += (first ? "" : ",") + k + "=" + v;
    first = false;
  }
  return out;
}

Config make_config(const std::string& family,
                   const std::vector<std::pair<std::string, std::string>>& given, bool combine) {
  const FamilySchema* schema = find_family_schema(family);
  if (!schema)
    throw UsageError(fmt::format("unknown family '{}' (known: {})", family, known_families()));
  std::set<std::string> seen;
  for (const auto& [k, v] : given) {
    if (!schema->find(k)) {
      std::string names;
      for (const auto& p : schema->params) names += (names.empty() ? "" : ", ") + p.name;
      throw UsageError(
          fmt::format("{}: unknown parameter '{}' (parameters: {})", family, k, names));
    }
    if (!seen.insert(k).second)
      throw UsageError(fmt::format("{}: parameter '{}' given twice", family, k));
  }
  Config c;
  c.family_ = family;
  for (const auto& p : schema->params) {
    const std::string* raw = nullptr;
    for (const auto& [k, v] : given)
      if (k == p.name) raw = &v;
    if (!raw && p.default_value.empty())
      throw UsageError(fmt::format("{}: missing required parameter '{}'", family, p.name));
    c.values_.emplace_back(p.name, check_value(*schema, p, raw ? *raw : p.default_value));
  }
  if (combine && schema->finalize) schema->finalize(c);
  return c;
}

int64_t dtype_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

Config parse_config(const std::string& text,
                    const std::vector<std::pair<std::string, std::string>>& overrides) {
  auto colon = text.find(':');
  if (colon == std::string::npos)
    if (const NamedConfig* named = find_named_config(text))
      return parse_config(named->config, overrides);
  std::string family = text.substr(0, colon);
  if (family.empty()) throw UsageError(fmt::format("config '{}': missing family before ':'", text));
  std::vector<std::pair<std::string, std::string>> given;
  if (colon != std::string::npos && colon + 1 < text.size()) {
    std::string rest = text.substr(colon + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t comma = rest.find(',', start);
      std::string item =
          rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      auto eq = item.find('=');
      if (item.empty() || eq == std::string::npos || eq == 0)
        throw UsageError(fmt::format("config '{}': expected key=value, got '{}'", text, item));
      given.emplace_back(item.substr(0, eq), item.substr(eq + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const auto& [k, v] : overrides) {
    bool replaced = false;
    for (auto& [gk, gv] : given)
      if (gk == k) gv = v, replaced = true;
    if (!replaced) given.emplace_back(k, v);
  }
  // `tinyllama-1.1b:seq=256`: a named config with some of its values changed.
  if (!find_family_schema(family))
    if (const NamedConfig* named = find_named_config(family))
      return parse_config(named->config, given);
  return make_config(family, given);
}

}  // namespace tb
