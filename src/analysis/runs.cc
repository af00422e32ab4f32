#include "analysis/runs.h"

#include <algorithm>
#include <limits>
#include <set>

#include "base/errors.h"
#include "record/metrics.h"
#include "spec/family.h"
#include "spec/stack.h"
#include "store/store.h"

namespace tb {

double Run::throughput() const {
  const double u = metric("units_per_s");
  return std::isfinite(u) ? u : metric("examples_per_s");
}

double Run::metric(const std::string& name) const {
  auto it = metrics.find(name);
  return it == metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

std::optional<double> Run::number(const std::string& param) const {
  return param_number(params, param);
}

std::vector<std::string> RunSet::families() const {
  std::set<std::string> f;
  for (const auto& r : runs) f.insert(r.family);
  return {f.begin(), f.end()};
}

std::vector<const Run*> RunSet::of_family(const std::string& family, bool ok_only) const {
  std::vector<const Run*> out;
  for (const auto& r : runs)
    if ((family.empty() || r.family == family) && (!ok_only || r.ok())) out.push_back(&r);
  return out;
}

RunSet only_family(RunSet runs, const std::string& family) {
  if (family.empty()) return runs;
  std::vector<Run> kept;
  for (auto& r : runs.runs)
    if (r.family == family) kept.push_back(std::move(r));
  if (kept.empty()) throw UsageError("no run of family '" + family + "' in the store(s)");
  runs.runs = std::move(kept);
  // Profiles and memory breakdowns of other families too: roofline and observations read them.
  const auto of = [&](const std::string& config) {
    std::string f;
    config_params(config, &f);
    return f == family;
  };
  std::vector<ProfileRow> profiles;
  for (auto& p : runs.profiles)
    if (of(p.profile.config)) profiles.push_back(std::move(p));
  runs.profiles = std::move(profiles);
  std::vector<MemoryRow> memory;
  for (auto& m : runs.memory)
    if (m.breakdown.is_object() && of(m.breakdown.value("config", "")))
      memory.push_back(std::move(m));
  runs.memory = std::move(memory);
  return runs;
}

bool is_reference_family(const std::string& family) {
  const FamilySchema* s = find_family_schema(family);
  return s && s->is_reference();
}

std::vector<const Run*> reference_runs(const RunSet& runs, bool ok_only) {
  std::vector<const Run*> out;
  for (const auto& r : runs.runs)
    if ((!ok_only || r.ok()) && is_reference_family(r.family)) out.push_back(&r);
  return out;
}

namespace {

// The key=value pairs of `family:k=v,...` in the order written.
std::vector<std::pair<std::string, std::string>> config_pairs(const std::string& config) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto colon = config.find(':');
  if (colon == std::string::npos) return out;
  size_t pos = colon + 1;
  while (pos <= config.size()) {
    size_t comma = config.find(',', pos);
    if (comma == std::string::npos) comma = config.size();
    const std::string kv = config.substr(pos, comma - pos);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> config_params(const std::string& config, std::string* family) {
  if (family) *family = config.substr(0, config.find(':'));
  const auto pairs = config_pairs(config);
  return {pairs.begin(), pairs.end()};
}

const std::vector<MetricInfo>& metric_infos() {
  static const std::vector<MetricInfo> m = [] {
    std::vector<MetricInfo> v;
    for (const Metric& t : metric_table())
      if (t.analysable()) v.push_back({t.column, t.label, t.unit, t.higher_is_better, t.directed});
    return v;
  }();
  return m;
}

const MetricInfo& metric_info(const std::string& name) {
  for (const auto& m : metric_infos())
    if (m.name == name) return m;
  std::string known;
  for (const auto& m : metric_infos()) known += (known.empty() ? "" : ", ") + m.name;
  throw UsageError("unknown metric '" + name + "' (known: " + known + ")");
}

std::vector<Point> points_of(const std::vector<const Run*>& runs, const std::string& metric) {
  std::vector<Point> out;
  for (const Run* r : runs) {
    Point p{r->config, r->family, r->status, r->error, r->params, std::nullopt, r, r->unstable()};
    const double v = r->metric(metric);
    if (r->ok() && std::isfinite(v)) p.value = v;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> varying_numeric_params(const std::vector<const Run*>& runs) {
  std::map<std::string, std::set<double>> values;
  std::set<std::string> non_numeric;
  for (const Run* r : runs)
    for (const auto& [k, v] : r->params) {
      const auto x = r->number(k);
      if (x)
        values[k].insert(*x);
      else
        non_numeric.insert(k);
    }
  std::vector<std::string> out;
  // Parameter order of the first run's config is the family's canonical order.
  if (runs.empty()) return out;
  std::vector<std::string> order;
  for (const auto& [k, v] : config_pairs(runs.front()->config)) order.push_back(k);
  for (const auto& [k, v] : values)
    if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
  for (const auto& k : order)
    if (!non_numeric.count(k) && values.count(k) && values[k].size() > 1) out.push_back(k);
  return out;
}

namespace {

std::string stack_label(const nlohmann::json& row) {
  auto text = [&](const char* k) {
    return row.contains(k) && row[k].is_string() ? row[k].get<std::string>() : std::string();
  };
  // A stack requested as an experiment's axis is named by its request.
  const std::string identity = text("stack_identity");
  if (!identity.empty()) {
    const auto j = nlohmann::json::parse(identity, nullptr, false);
    if (j.is_object() && j.contains("requested") && j["requested"].is_string()) {
      try {
        return parse_stack(j["requested"].get<std::string>()).label();
      } catch (const std::exception&) {
        return j["requested"].get<std::string>();  // written by another version
      }
    }
  }
  std::string blas = text("blas");
  blas = blas.substr(0, blas.find(' '));
  std::string label = blas.empty() ? "unknown-blas" : blas;
  if (!text("libtorch").empty()) label += " / libtorch " + text("libtorch");
  return label;
}

// Every numeric column the store keeps for a run, whether or not analyses chart it.
const std::vector<std::string>& metric_columns() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> v;
    for (const Metric& t : metric_table())
      if (t.stored() && t.numeric()) v.push_back(t.column);
    return v;
  }();
  return c;
}

}  // namespace

int Run::repetitions() const {
  const double n = metric("repetitions");
  return std::isfinite(n) && n >= 1 ? int(n) : 1;
}

RunSet load_runs(const std::vector<std::string>& paths) {
  RunSet set;
  // A config measured twice on one platform and stack label (e.g. by two trainbench
  // revisions) counts once: the later row wins.
  std::map<std::tuple<std::string, std::string, std::string>, size_t> seen;
  for (const auto& path : paths) {
    auto store = Store::open_read_only(path);
    std::map<int64_t, std::string> platform_names;
    for (const auto& p : store->platforms()) {
      const std::string name = p.at("name").get<std::string>();
      platform_names[p.at("id").get<int64_t>()] = name;
      const bool known = std::any_of(set.platforms.begin(), set.platforms.end(),
                                     [&](const PlatformInfo& i) { return i.name == name; });
      if (known) continue;
      PlatformInfo info{name, std::nullopt, ""};
      if (p.at("detail").is_object()) {
        try {
          info.description = parse_platform(p.at("detail"), path + ": platform " + name);
        } catch (const std::exception& e) {
          // An unreadable description only costs the roofs; the runs still load.
          info.problem = e.what();
        }
      }
      set.platforms.push_back(std::move(info));
    }
    set.stores.push_back(path);
    for (const auto& p : store->profiles())
      set.profiles.push_back(
          {platform_names[p.at("platform_id").get<int64_t>()], profile_from_json(p)});
    for (const auto& m : store->memory_breakdowns())
      set.memory.push_back({platform_names[m.at("platform_id").get<int64_t>()], m});
    for (const auto& row : store->runs()) {
      Run r;
      r.config = row.at("config").get<std::string>();
      r.params = config_params(r.config, &r.family);
      r.status = row.at("status").get<std::string>();
      if (row.contains("error") && row["error"].is_string()) r.error = row["error"];
      r.platform = row.at("platform").get<std::string>();
      r.stack = stack_label(row);
      if (row.contains("end_reason") && row["end_reason"].is_string())
        r.end_reason = row["end_reason"];
      for (auto [key, field] :
           {std::pair{"started_at", &r.started_at}, std::pair{"finished_at", &r.finished_at}})
        if (row.contains(key) && row[key].is_string()) *field = row[key];
      r.store = path;
      if (row.contains("unit") && row["unit"].is_string()) r.throughput_unit = row["unit"];
      for (const auto& m : metric_columns())
        if (row.contains(m) && row[m].is_number()) r.metrics[m] = row[m].get<double>();
      const auto key = std::make_tuple(r.config, r.platform, r.stack);
      auto it = seen.find(key);
      if (it != seen.end()) {
        // Keep a success over a failure; otherwise the later row.
        if (set.runs[it->second].ok() && !r.ok()) continue;
        set.runs[it->second] = std::move(r);
      } else {
        seen[key] = set.runs.size();
        set.runs.push_back(std::move(r));
      }
    }
  }
  return set;
}

}  // namespace tb
