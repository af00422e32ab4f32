#pragma once
// `trainbench report`: one self-contained HTML file (charts, platform table, observations,
// per-chart CSV downloads) that opens offline.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/summary.h"
#include "report/charts.h"

namespace tb {

struct ReportOptions {
  SummaryOptions summary;
  // A CSV of published throughputs to validate the accelerator model against
  // (analysis/published.h); empty: no such section.
  std::string published;
  ChartOptions charts;
  std::string title = "trainbench report";
  // The accelerator of the time-to-accuracy section (a platform name or file); empty: the
  // stored description of the platform the emulations ran on.
  std::string tta_platform;
  // charts.color_param named by the user: a name no run has is refused (a typo would color
  // every point alike, silently); the default may be absent.
  bool color_named = false;
};

// HTML tables of the simulation sections (report/simulation_views.h), empty when absent.
struct SimulationSections {
  std::string validation_html, tta_html, tta_platform, published_html;
};

// Text from data (configs, platform names, errors) goes through these two and nowhere else.
std::string html_escape(std::string_view text);
// JSON safe to place inside <script type="application/json">: no '<', '>' or '&' remain.
std::string json_for_script(const nlohmann::json& j);

std::string render_report(const RunSet& runs, const Summary& s, const ChartSet& charts,
                          const ReportOptions& o, const SimulationSections& sim = {});

struct ReportStats {
  size_t runs = 0, charts = 0, observations = 0, bytes = 0;
};
// Loads the stores, analyses them and writes the report atomically to `out`.
ReportStats write_report(const std::vector<std::string>& stores, const std::string& out,
                         const ReportOptions& o);

}  // namespace tb
