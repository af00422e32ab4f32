#include "analysis/comparison.h"

#include <algorithm>
#include <cmath>

#include "base/errors.h"
#include "spec/family.h"

namespace tb {
namespace {

std::string side_of(const Run& r, const std::string& axis) {
  if (axis == "platform") return r.platform;
  if (axis == "stack") return r.stack;
  auto it = r.params.find(axis);
  if (it != r.params.end()) return it->second;
  // A parameter left out of the config text is at its default (ParamSpec::omit_default).
  if (const FamilySchema* s = find_family_schema(r.family))
    if (const ParamSpec* p = s->find(axis)) return p->default_value;
  return {};
}

// What must be equal for two runs to be the same experiment on either side.
std::string match_key(const Run& r, const std::string& axis) {
  std::string key = r.family;
  for (const auto& [k, v] : r.params)
    if (k != axis) key += "," + k + "=" + v;
  if (axis != "platform") key += "|" + r.platform;
  if (axis != "stack") key += "|" + r.stack;
  return key;
}

}  // namespace

std::vector<std::string> axis_values(const RunSet& runs, const std::string& axis) {
  std::vector<std::string> out;
  for (const auto& r : runs.runs) {
    const std::string v = side_of(r, axis);
    if (!v.empty() && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

ComparisonView compare_runs(const RunSet& runs, const std::string& axis, const std::string& a,
                            const std::string& b, const std::string& metric,
                            const std::string& family) {
  const MetricInfo& info = metric_info(metric);
  if (!info.directed) {
    std::string speeds;
    for (const auto& m : metric_infos())
      if (m.directed) speeds += (speeds.empty() ? "" : ", ") + m.name;
    throw UsageError("--metric " + metric + ": " + info.label +
                     " is not a speed, so it has no speedup (compare takes " + speeds + ")");
  }
  const auto values = axis_values(runs, axis);
  for (const auto& side : {a, b})
    if (std::find(values.begin(), values.end(), side) == values.end()) {
      std::string known;
      for (const auto& v : values) known += (known.empty() ? "" : ", ") + v;
      throw UsageError(
          "no run has " + axis + " '" + side + "'" +
          (known.empty() ? std::string(" (no run has that axis)") : " (present: " + known + ")"));
    }
  if (a == b) throw UsageError("both sides of the comparison are " + axis + " '" + a + "'");
  ComparisonView v;
  v.axis = axis, v.a = a, v.b = b, v.metric = metric;
  std::map<std::string, const Run*> side_a, side_b;
  for (const auto& r : runs.runs) {
    if (!r.ok() || (!family.empty() && r.family != family)) continue;
    const double m = r.metric(metric);
    if (!std::isfinite(m) || m <= 0) continue;
    const std::string s = side_of(r, axis);
    if (s == a) side_a[match_key(r, axis)] = &r;
    if (s == b) side_b[match_key(r, axis)] = &r;
  }
  auto rate = [&](const Run* r) {
    const double m = r->metric(metric);
    return info.higher_is_better ? m : 1 / m;
  };
  // Both sides keyed by what must match; a matched pair is then named by A's config.
  std::map<std::string, double> ra, rb;
  std::map<std::string, std::map<std::string, double>> fa, fb;
  for (const auto& [k, r] : side_a) ra[k] = fa[r->family][k] = rate(r);
  for (const auto& [k, r] : side_b) rb[k] = fb[r->family][k] = rate(r);
  v.stats = compare(ra, rb);
  for (const auto& [fam, m] : fa) v.by_family[fam] = compare(m, fb[fam]);
  // Each side's value as stored (a time, not its inverse: exported under the metric's name,
  // the inverses read as step times of 2415 s), beside the speedup; taken from the runs, as
  // 1 / (1 / t) need not give t back.
  // (`config` is still the match key here.)
  const auto as_stored = [&](Comparison& c) {
    for (auto& s : c.matched)
      s.a = side_a.at(s.config)->metric(metric), s.b = side_b.at(s.config)->metric(metric);
  };
  as_stored(v.stats);
  for (auto& [fam, c] : v.by_family) as_stored(c);
  for (auto& s : v.stats.matched) s.config = side_a.at(s.config)->config;
  for (auto& [fam, c] : v.by_family)
    for (auto& s : c.matched) s.config = side_a.at(s.config)->config;

  for (const auto& [k, ra_run] : side_a) {
    auto it = side_b.find(k);
    if (it == side_b.end()) continue;
    Point p{
        ra_run->config, ra_run->family, "ok", "", ra_run->params, rate(it->second) / rate(ra_run),
        ra_run};
    if (axis != "platform" && axis != "stack") p.params.erase(axis);
    p.unstable = ra_run->unstable() || it->second->unstable();
    if (p.unstable) v.unstable.push_back(ra_run->config);
    v.points.push_back(std::move(p));
  }
  for (const auto& fam : runs.families()) {
    std::vector<Point> pts;
    for (const auto& p : v.points)
      if (p.family == fam) pts.push_back(p);
    if (pts.empty()) continue;
    std::vector<const Run*> rs;
    for (const auto& p : pts) rs.push_back(p.run);
    auto params = varying_numeric_params(rs);
    params.erase(std::remove(params.begin(), params.end(), axis), params.end());
    const auto samples = samples_of(pts, params);
    if (!params.empty() && samples.size() >= params.size() + 2) {
      const Regression& r = v.regression_by_family[fam] = sensitivity(samples, params);
      const auto ranked = ranked_params(r);
      if (ranked.size() >= 2) v.heat_by_family[fam] = heat_map(pts, ranked[0], ranked[1]);
    }
  }
  const bool b_wins = v.stats.geomean >= 1;
  for (const auto& s : v.stats.matched)
    if ((s.speedup > 1) != b_wins && s.speedup != 1) v.flips.push_back(s);
  std::sort(v.flips.begin(), v.flips.end(), [](const Speedup& x, const Speedup& y) {
    return std::abs(std::log(x.speedup)) > std::abs(std::log(y.speedup));
  });
  return v;
}

}  // namespace tb
