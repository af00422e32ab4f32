#include "analysis/summary.h"

#include <algorithm>

namespace tb {

std::string chart_id(const std::string& kind, const std::string& name) {
  std::string id = "chart-" + kind;
  if (!name.empty()) id += "-";
  for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return id;
}

Summary summarize(const RunSet& runs, const SummaryOptions& o) {
  metric_info(o.metric);  // rejects an unknown metric up front
  Summary s;
  s.metric = o.metric;
  for (const auto& fam : runs.families()) {
    FamilyView f;
    f.family = fam;
    const auto all = runs.of_family(fam, false);
    f.points = points_of(all, o.metric);
    for (const Run* r : all) f.by_status[r->status] += 1;
    f.params = varying_numeric_params(all);
    const auto samples = samples_of(f.points, f.params);
    // k first-order terms, plus k(k+1)/2 products with --second-order.
    const size_t k = f.params.size();
    const size_t terms = o.second_order ? k * (k + 3) / 2 : k;
    if (!f.params.empty() && samples.size() >= terms + 2)
      f.regression = sensitivity(samples, f.params, o.second_order);
    std::vector<std::string> axes = f.regression ? ranked_params(*f.regression) : f.params;
    if (axes.size() >= 2) f.heat = heat_map(f.points, axes[0], axes[1]);
    s.families.push_back(std::move(f));
  }
  s.boxes = box_groups(runs, o.metric);
  s.rooflines = rooflines(runs);
  auto comparisons = o.comparisons;
  // By default every other value of an axis is compared with its first (the baseline),
  // a few at most: three BLAS libraries give two comparisons against the first.
  if (comparisons.empty())
    for (const std::string axis : {"platform", "stack", "dtype", "numerics"}) {
      const auto v = axis_values(runs, axis);
      for (size_t i = 1; i < v.size() && i <= 4; ++i) comparisons.push_back({axis, v[0], v[i]});
    }
  for (const auto& c : comparisons) {
    auto view = compare_runs(runs, c.at(0), c.at(1), c.at(2));
    if (!view.points.empty() || !o.comparisons.empty()) s.comparisons.push_back(std::move(view));
  }
  s.scaling = scaling(runs, "threads");
  for (auto& series : scaling(runs, "workers")) s.scaling.push_back(std::move(series));
  s.observations = observe(runs, s);
  return s;
}

}  // namespace tb
