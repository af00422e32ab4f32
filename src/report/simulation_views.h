#pragma once
// The report's simulation-phase sections: how well the accelerator model predicts this
// machine's measured step times, and time-to-accuracy per emulated variant.
#include <string>
#include <vector>

#include "analysis/tta.h"
#include "analysis/validation.h"
#include "report/charts.h"

namespace tb {

// Predicted vs measured step time, log-log, with the y = x line (section "simulation").
void add_validation_chart(ChartSet& cs, const std::vector<sim::Validation>& v);
// Published throughputs (analysis/published.h): predicted vs published throughput, log-log,
// colored by platform and shaped by format; section "published".
void add_published_chart(ChartSet& cs, const std::vector<sim::Validation>& v);
// Every published row with its prediction and error, then median and p90 per platform.
std::string published_table_html(const std::vector<sim::Validation>& v);
// Test accuracy vs simulated training time, one line per seed, colored by variant
// (section "tta").
void add_tta_chart(ChartSet& cs, const TtaResult& r);

// The tables under them: median and p90 error per platform and family; TTA per variant.
std::string validation_table_html(const std::vector<sim::Validation>& v);
std::string tta_table_html(const TtaResult& r);

}  // namespace tb
