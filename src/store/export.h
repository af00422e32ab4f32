#pragma once
#include <string>

#include "store/store.h"

namespace tb {

// Flat tables a pandas user loads in one line (pd.read_csv / pd.read_json): one row per
// run, hyperparameters as p_<name> columns, platform and stack fields inline.
std::string export_csv(Store& store);
std::string export_json(Store& store);

// One CSV field (RFC 4180): null is empty, strings as they are, other values as JSON,
// quoted when they hold a comma, a quote or a line break.
std::string csv_field(const nlohmann::json& v);

}  // namespace tb
