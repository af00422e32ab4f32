#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "record/context.h"
#include "record/result.h"

namespace tb {

nlohmann::json to_json(const Context& c);
nlohmann::json to_json(const StepCost& c, bool with_layers);
nlohmann::json to_json(const RunResult& r, bool with_layers);

// Every JSON document a command prints: schema_version, kind ("trainbench.<command>"), this
// process's context block, then `fields` (an object: "results", or the command's own keys).
nlohmann::json document(const std::string& kind, const nlohmann::json& fields);

// The document `trainbench run --json` prints: schema_version, context, results.
nlohmann::json run_document(const Context& c, const std::vector<RunResult>& results,
                            bool with_layers);

// A number field of a result object, or `fallback` when it is missing or not a number (NaN
// and infinity are written as null).
double number_or(const nlohmann::json& j, const char* key, double fallback);

}  // namespace tb
