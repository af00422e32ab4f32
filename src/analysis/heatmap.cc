#include "analysis/heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/errors.h"

namespace tb {
namespace {

std::optional<double> number(const Point& p, const std::string& k) {
  return param_number(p.params, k);
}

}  // namespace

HeatMap heat_map(const std::vector<Point>& points, const std::string& x, const std::string& y,
                 const std::map<std::string, std::string>& fix, HeatCells mode) {
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
  std::map<std::pair<double, double>, std::vector<const Point*>> all;
  for (const Point* p : kept) {
    const std::pair<double, double> xy{*number(*p, x), *number(*p, y)};
    all[xy].push_back(p);
    std::map<std::string, std::string> rest;
    for (const auto& [k, v] : p->params)
      if (k != x && k != y) rest[k] = v;
    if (rest == h.fixed) at[xy] = p;
  }
  // A full grid (or a filtered one) is a Cartesian product of its parameters' values; a
  // sample is not, and then no slice is covered: its cells are aggregated.
  std::map<std::string, std::set<std::string>> values_of;
  std::set<std::map<std::string, std::string>> combinations;
  for (const Point* p : kept) {
    combinations.insert(p->params);
    for (const auto& [k, v] : p->params) values_of[k].insert(v);
  }
  double grid_size = 1;
  for (const auto& [k, vs] : values_of) grid_size *= double(vs.size());
  const bool full_grid = double(combinations.size()) >= grid_size;
  h.aggregated = mode == HeatCells::median || (mode == HeatCells::automatic && !full_grid);
  if (h.aggregated) h.fixed = fix;
  for (double vy : h.ys)
    for (double vx : h.xs) {
      HeatCell c;
      c.x = vx, c.y = vy;
      if (h.aggregated) {
        auto it = all.find({vx, vy});
        std::vector<double> values;
        std::map<std::string, int> statuses;
        const Point* with_value = nullptr;
        if (it != all.end())
          for (const Point* p : it->second) {
            statuses[p->status] += 1;
            if (!p->value) continue;
            values.push_back(*p->value);
            with_value = p;
            c.unstable = c.unstable || p->unstable;
          }
        c.runs = int(values.size());
        if (it == all.end()) {
          c.status = "not-run";
          c.error = "no run of this combination in the store";
        } else if (values.empty()) {
          // No value: the cell says what happened to most of its runs.
          c.status = std::max_element(statuses.begin(), statuses.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                     })->first;
          c.error = fmt::format("{} run(s), none with a value", it->second.size());
        } else {
          std::sort(values.begin(), values.end());
          const size_t n = values.size();
          c.value = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
          c.status = "ok";
          c.config = n == 1 ? with_value->config : "";
        }
        h.cells.push_back(std::move(c));
        continue;
      }
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
        c.runs = c.value ? 1 : 0;
        if (c.status == "ok" && !c.value) c.error = "no value for this metric";
      }
      h.cells.push_back(std::move(c));
    }
  return h;
}

}  // namespace tb
