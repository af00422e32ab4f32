#pragma once
// The reference-model suite (TBD's and ParaDnn's real models): every family whose schema
// names a task, at its default config or over its batch sweep, as a sweep that
// `trainbench suite` runs through the same machinery as `trainbench sweep` (docs/suite.md).
#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/sweep.h"

namespace tb {

// The reference families (FamilySchema::is_reference), sorted by name.
std::vector<const FamilySchema*> reference_families();

// The suite as a sweep: one grid per model, with a batch axis over the family's
// batch_sweep when `batch_sweep` is set (the default batch when a family has none).
// `models` empty: every reference family. A name that is not a family is a UsageError
// naming it; a generated family may be named explicitly (it runs at its defaults).
SweepSpec suite_sweep(const std::vector<std::string>& models, bool batch_sweep);

// Its configs, in model order, batch ascending.
std::vector<Config> suite_configs(const std::vector<std::string>& models, bool batch_sweep);

// "a,b , c" -> {"a", "b", "c"}; empty items dropped.
std::vector<std::string> split_models(const std::string& text);

}  // namespace tb
