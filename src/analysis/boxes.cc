#include "analysis/boxes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

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
  // Within a family, groups in the order of their value: numbers as numbers (nodes=64 before
  // nodes=256, which the names' text order put after it).
  std::vector<std::pair<std::pair<std::string, double>, std::string>> order;
  for (const auto& [g, ps] : groups) {
    const std::string& k = split_by[ps.front()->family];
    double v = NAN;
    if (!k.empty() && ps.front()->params.count(k)) {
      const std::string& text = ps.front()->params.at(k);
      char* end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (end && *end == '\0' && end != text.c_str()) v = x;
    }
    order.push_back({{ps.front()->family, v}, g});
  }
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    // family; then numbers by value before words; then the name (words among themselves)
    const double a = x.first.second, b = y.first.second;
    const bool na = std::isfinite(a), nb = std::isfinite(b);
    return std::make_tuple(x.first.first, !na, na ? a : 0.0, x.second) <
           std::make_tuple(y.first.first, !nb, nb ? b : 0.0, y.second);
  });
  for (const auto& [key, g] : order) {
    const auto& ps = groups.at(g);
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
