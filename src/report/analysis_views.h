#pragma once
// The analyses as a terminal shows them, as JSON (with schema_version and the context
// block) and as CSV rows: what `trainbench analyze` and `trainbench compare` print.
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/summary.h"

namespace tb {

// Keys keep the order they were written in, so CSV columns read naturally.
struct View {
  std::string text;             // for a terminal
  nlohmann::ordered_json rows;  // flat rows: the CSV form
  nlohmann::ordered_json json;  // the full JSON form (without the document wrapper)
};

View sensitivity_view(const std::string& family, const Regression& r, const std::string& metric);
View heat_view(const std::string& family, const HeatMap& h, const std::string& metric);
View box_view(const std::vector<BoxGroup>& boxes, const std::string& metric);
View roofline_view(const std::vector<RooflineView>& views);
View comparison_view(const ComparisonView& c);
View scaling_view(const std::vector<ScalingSeries>& series);
View observations_view(const std::vector<Observation>& obs);

// {"schema_version", "context", "kind", ...view.json}
nlohmann::ordered_json view_document(const std::string& kind, const View& v);
// RFC 4180 CSV of flat rows; columns in order of first appearance.
std::string rows_csv(const nlohmann::ordered_json& rows);

}  // namespace tb
