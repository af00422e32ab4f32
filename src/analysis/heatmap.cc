#include "analysis/heatmap.h"

#include <algorithm>
#include <set>

#include "spec/errors.h"

namespace tb {
namespace {

std::optional<double> number(const Point& p, const std::string& k) {
  return param_number(p.params, k);
}

}  // namespace

HeatMap heat_map(const std::vector<Point>& points, const std::string& x, const std::string& y,
                 const std::map<std::string, std::string>& fix) {
  if (x == y) throw UsageError("heat map axes must differ (both are '" + x + "')");
  HeatMap h;
  h.x = x, h.y = y;
  std::set<double> xs, ys;
  for (const auto& p : points) {
    const auto vx = number(p, x), vy = number(p, y);
    if (!vx)
      throw UsageError("heat map axis '" + x + "' is not a numeric parameter of " + p.config);
    if (!vy)
      throw UsageError("heat map axis '" + y + "' is not a numeric parameter of " + p.config);
    xs.insert(*vx), ys.insert(*vy);
  }
  h.xs.assign(xs.begin(), xs.end());
  h.ys.assign(ys.begin(), ys.end());

  std::vector<const Point*> kept;
  for (const auto& p : points) {
    bool match = true;
    for (const auto& [k, v] : fix) {
      if (k == x || k == y) throw UsageError("cannot fix '" + k + "': it is a heat map axis");
      auto it = p.params.find(k);
      if (it == p.params.end())
        throw UsageError("cannot fix '" + k + "': not a parameter of " + p.config);
      if (it->second != v) match = false;
    }
    if (match) kept.push_back(&p);
  }
  if (kept.empty() && !points.empty()) {
    std::string what;
    for (const auto& [k, v] : fix) what += (what.empty() ? "" : ",") + k + "=" + v;
    throw UsageError("no run has " + what);
  }
  // The remaining free parameters are held at their best-covered combination.
  struct Slice {
    size_t ok = 0, all = 0;
  };
  std::map<std::map<std::string, std::string>, Slice> slices;
  for (const Point* p : kept) {
    std::map<std::string, std::string> rest;
    for (const auto& [k, v] : p->params)
      if (k != x && k != y) rest[k] = v;
    auto& s = slices[rest];
    s.all += 1, s.ok += p->value.has_value();
  }
  const std::map<std::string, std::string>* best = nullptr;
  Slice best_s;
  for (const auto& [rest, s] : slices)
    if (!best || s.ok > best_s.ok || (s.ok == best_s.ok && s.all > best_s.all))
      best = &rest, best_s = s;
  if (best) h.fixed = *best;

  std::map<std::pair<double, double>, const Point*> at;
  for (const Point* p : kept) {
    std::map<std::string, std::string> rest;
    for (const auto& [k, v] : p->params)
      if (k != x && k != y) rest[k] = v;
    if (rest == h.fixed) at[{*number(*p, x), *number(*p, y)}] = p;
  }
  for (double vy : h.ys)
    for (double vx : h.xs) {
      HeatCell c;
      c.x = vx, c.y = vy;
      auto it = at.find({vx, vy});
      if (it == at.end()) {
        c.status = "not-run";
        c.error = "no run of this combination in the store";
      } else {
        c.config = it->second->config;
        c.status = it->second->status;
        c.error = it->second->error;
        c.value = it->second->value;
        c.unstable = it->second->unstable;
        if (c.status == "ok" && !c.value) c.error = "no value for this metric";
      }
      h.cells.push_back(std::move(c));
    }
  return h;
}

}  // namespace tb
