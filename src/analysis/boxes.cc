#include "analysis/boxes.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/errors.h"

namespace tb {
namespace {

std::vector<BoxGroup> from_points(const std::vector<Point>& points, bool split,
                                  const std::string& by = "") {
  std::map<std::string, std::vector<const Point*>> groups;
  std::map<std::string, std::vector<const Run*>> by_family;
  for (const auto& p : points)
    if (p.run) by_family[p.family].push_back(p.run);
  std::map<std::string, std::string> split_by;
  for (const auto& [f, rs] : by_family)
    split_by[f] = !by.empty() ? by : split ? box_split_param(rs) : "";
  for (const auto& p : points) {
    if (!p.value || !std::isfinite(*p.value)) continue;
    std::string g = p.family;
    const std::string& k = split_by[p.family];
    if (!k.empty() && p.params.count(k)) g += " " + k + "=" + p.params.at(k);
    groups[g].push_back(&p);
  }
  std::vector<BoxGroup> out;
  for (const auto& [g, ps] : groups) {
    std::vector<double> vals;
    for (const Point* p : ps) vals.push_back(*p->value);
    BoxGroup b{g, box_stats(vals), {}};
    for (const Point* p : ps)
      if (*p->value < b.stats.p2 || *p->value > b.stats.p98) b.outlier_runs.push_back(p->run);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

std::string box_split_param(const std::vector<const Run*>& runs) {
  for (const char* k : {"cell", "block"}) {
    std::string first;
    for (const Run* r : runs) {
      auto it = r->params.find(k);
      if (it == r->params.end()) break;
      if (first.empty()) first = it->second;
      if (it->second != first) return k;
    }
  }
  return "";
}

std::vector<BoxGroup> box_groups(const RunSet& runs, const std::string& metric,
                                 const std::string& by, const std::string& family) {
  const auto points = points_of(runs.of_family(family, true), metric);
  if (!by.empty() && std::none_of(points.begin(), points.end(),
                                  [&](const Point& p) { return p.params.count(by) > 0; }))
    throw UsageError("box --by " + by + ": no ok run" + (family.empty() ? "" : " of " + family) +
                     " has that hyperparameter");
  return from_points(points, true, by);
}

std::vector<BoxGroup> box_groups(const std::vector<Point>& points) {
  return from_points(points, false);
}

}  // namespace tb
