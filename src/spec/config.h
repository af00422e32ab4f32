#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spec/family.h"

namespace tb {

// A workload: a family plus a value for every one of its parameters, in the
// schema's order. Its text form `family:key=value,...` round-trips exactly:
// parse_config(c.str()) == c, so any result can be re-run by pasting its config.
class Config {
 public:
  Config() = default;

  const std::string& family() const { return family_; }
  const FamilySchema& schema() const;

  const std::string& get(const std::string& key) const;  // throws UsageError if absent
  int64_t get_int(const std::string& key) const;
  bool has(const std::string& key) const;
  // Replaces one value after validating it; the canonical order is kept.
  void set(const std::string& key, const std::string& value);

  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }
  std::string str() const;

  bool operator==(const Config& o) const { return family_ == o.family_ && values_ == o.values_; }
  bool operator!=(const Config& o) const { return !(*this == o); }

  friend Config make_config(const std::string& family,
                            const std::vector<std::pair<std::string, std::string>>& given,
                            bool combine);

 private:
  std::string family_;
  std::vector<std::pair<std::string, std::string>> values_;
};

// Builds a config from explicit key/value pairs; missing keys take defaults.
// Throws UsageError naming the field and value for anything invalid. `combine` false checks
// each value on its own and skips the family's checks between parameters and derived
// defaults (FamilySchema::finalize): a sweep's values, before they meet in combinations.
Config make_config(const std::string& family,
                   const std::vector<std::pair<std::string, std::string>>& given,
                   bool combine = true);

// Parses `family:key=value,...`, or the name of a named config (`gpt2-small`: spec/family.h).
// Throws UsageError.
// `overrides` replace or add values before the config is checked (`run --workers N`: a
// config valid only with those workers).
Config parse_config(const std::string& text,
                    const std::vector<std::pair<std::string, std::string>>& overrides = {});

// Bytes per element of a config's dtype (fp32 4, bf16 2).
int64_t dtype_bytes(const std::string& dtype);

}  // namespace tb
