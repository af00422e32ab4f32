#pragma once
// The report's charts as Vega-Lite specifications plus the tables they draw, built from a
// summary. Data lives once in `tables`; a chart names the tables it uses, so a store of
// 10,000 runs is not copied into every chart.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/summary.h"

namespace tb {

struct Chart {
  std::string id, section, title, caption;
  std::vector<std::string> tables;  // datasets the spec refers to by name
  std::string csv_table;            // the table behind "Download data (CSV)"
  nlohmann::json spec;              // Vega-Lite, without data values
};

struct ChartSet {
  std::vector<Chart> charts;
  nlohmann::json tables = nlohmann::json::object();  // name -> array of flat rows
};

// The parts every chart spec starts from: the Vega-Lite schema, its title and the look.
nlohmann::json chart_base(const std::string& title);
// A tooltip listing these fields with their Vega-Lite types.
nlohmann::json chart_tooltip(std::initializer_list<std::pair<const char*, const char*>> fields);

struct ChartOptions {
  std::string color_param = "batch";  // what colors roofline and comparison points
};

// The report section a comparison along this axis belongs to: "stacks" or "comparisons".
inline std::string comparison_section(const std::string& axis) {
  return axis == "stack" ? "stacks" : "comparisons";
}

ChartSet build_charts(const RunSet& runs, const Summary& s, const ChartOptions& o = {});

}  // namespace tb
