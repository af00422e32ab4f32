#include "record/memory.h"

#include <cmath>

namespace tb {

using nlohmann::json;

const char* category_name(int c) {
  static const char* names[] = {"weights",   "gradients",   "optimizer_state", "feature_maps",
                                "workspace", "temporaries", "inputs",          "other"};
  return c >= 0 && c < kMemoryCategories ? names[c] : "?";
}

double MemoryPoint::total() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

double MemoryBreakdown::estimate_of(int c) const {
  switch (c) {
    case kWeights:
      return estimate.weights;
    case kGradients:
      return estimate.gradients;
    case kOptimizerState:
      return estimate.optimizer_state;
    case kFeatureMaps:
      return estimate.feature_maps;
    case kInputs:
      return estimate.inputs;
    default:
      return -1;  // the cost model's workspace covers workspace and temporaries together
  }
}

LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  LinearFit f;
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= double(n), my /= double(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.r2 = syy > 0 ? (sxy * sxy) / (sxx * syy) : 1;
  return f;
}

MemorySweep summarize(std::vector<MemoryBreakdown> batches, std::optional<double> budget) {
  MemorySweep s;
  s.batches = std::move(batches);
  s.budget = budget;
  std::vector<double> x, fm, total;
  for (const auto& b : s.batches) {
    x.push_back(double(b.batch));
    fm.push_back(b.peak[kFeatureMaps]);
    total.push_back(b.peak_total);
  }
  s.feature_maps_fit = fit_line(x, fm);
  s.total_fit = fit_line(x, total);
  if (budget) {
    for (const auto& b : s.batches)
      if (b.peak_total <= *budget && (!s.largest_measured_fit || b.batch > *s.largest_measured_fit))
        s.largest_measured_fit = b.batch;
    if (s.batches.size() >= 2 && s.total_fit.slope > 0) {
      const double b = std::floor((*budget - s.total_fit.intercept) / s.total_fit.slope);
      s.largest_predicted_fit = b >= 1 ? int64_t(b) : 0;
    }
  }
  return s;
}

json to_json(const MemoryBreakdown& m, bool with_timeline) {
  json cats = json::object();
  for (int c = 0; c < kMemoryCategories; ++c) {
    const double e = m.estimate_of(c);
    cats[category_name(c)] = {{"peak_bytes", m.peak[c]},
                              {"at_peak_bytes", m.at_peak[c]},
                              {"estimate_bytes", e >= 0 ? json(e) : json(nullptr)},
                              {"difference_bytes", e >= 0 ? json(m.peak[c] - e) : json(nullptr)}};
  }
  const double transient_est = m.estimate.workspace;
  const double transient = m.peak[kWorkspace] + m.peak[kTemporaries];
  json j = {{"config", m.config},
            {"batch", m.batch},
            {"params", m.params},
            {"dtype_bytes", m.dtype_bytes},
            {"categories", cats},
            {"workspace_and_temporaries",
             {{"peak_bytes", transient},
              {"estimate_bytes", transient_est},
              {"difference_bytes", transient - transient_est}}},
            {"peak_bytes", m.peak_total},
            {"peak_phase", m.peak_phase},
            {"estimate_total_bytes", m.estimate.total()},
            {"allocations", m.allocations},
            {"reference",
             {{"params_x_dtype_bytes", double(m.params) * double(m.dtype_bytes)},
              {"optimizer_held_bytes", m.optimizer_held_bytes}}}};
  if (!m.estimate.references.empty()) {
    json refs = json::array();
    for (const auto& r : m.estimate.references)
      refs.push_back({{"label", r.label}, {"bytes", r.bytes}});
    j["estimate_references"] = refs;
  }
  if (with_timeline) {
    json names = json::array();
    for (int c = 0; c < kMemoryCategories; ++c) names.push_back(category_name(c));
    json points = json::array();
    for (const auto& p : m.timeline) {
      json bytes = json::array();
      for (double b : p.bytes) bytes.push_back(b);
      points.push_back({{"t_us", p.t_us}, {"phase", p.phase}, {"bytes", bytes}});
    }
    j["timeline"] = {{"categories", names}, {"points", points}};
  }
  return j;
}

json to_json(const MemorySweep& s, bool with_timeline) {
  json batches = json::array();
  for (const auto& b : s.batches) batches.push_back(to_json(b, with_timeline));
  auto fit = [](const LinearFit& f) {
    return json{
        {"slope_bytes_per_example", f.slope}, {"intercept_bytes", f.intercept}, {"r2", f.r2}};
  };
  auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  return {{"batches", batches},
          {"budget_bytes", s.budget ? json(*s.budget) : json(nullptr)},
          {"feature_maps_fit", fit(s.feature_maps_fit)},
          {"peak_fit", fit(s.total_fit)},
          {"largest_measured_batch_within_budget", opt(s.largest_measured_fit)},
          {"largest_predicted_batch_within_budget", opt(s.largest_predicted_fit)}};
}

}  // namespace tb
