#pragma once
// Every analysis of a set of runs at once: what the report draws and what
// `trainbench analyze observations` prints.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/boxes.h"
#include "analysis/comparison.h"
#include "analysis/heatmap.h"
#include "analysis/roofline.h"
#include "analysis/runs.h"
#include "analysis/scaling.h"

namespace tb {

struct FamilyView {
  std::string family;
  std::vector<Point> points;                // every run of the family, value = the metric
  std::vector<std::string> params;          // varying numeric hyperparameters
  std::optional<Regression> regression;     // when there are enough ok runs
  std::optional<HeatMap> heat;              // over the two highest-weight parameters
  std::map<std::string, size_t> by_status;  // run counts
};

struct Observation {
  std::string text;   // written from the numbers
  std::string chart;  // id of the chart that shows it
};

struct SummaryOptions {
  std::string metric = "flops_utilization";
  bool second_order = false;
  // Comparisons to draw as {axis, a, b}; empty: every axis with two or more values among
  // platform, stack and dtype, first value against second.
  std::vector<std::vector<std::string>> comparisons;
};

struct Summary {
  std::string metric;
  std::vector<FamilyView> families;
  std::vector<BoxGroup> boxes;
  std::vector<RooflineView> rooflines;
  std::vector<ComparisonView> comparisons;
  std::vector<ScalingSeries> scaling;
  std::vector<Observation> observations;
};

Summary summarize(const RunSet& runs, const SummaryOptions& options = {});

// Chart ids, shared by the report and the observations that link to it.
std::string chart_id(const std::string& kind, const std::string& name = "");

// Findings written from the numbers of a summary, most telling first.
std::vector<Observation> observe(const RunSet& runs, const Summary& s);

}  // namespace tb
