#include "report/charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace tb {

using json = nlohmann::json;

json chart_tooltip(std::initializer_list<std::pair<const char*, const char*>> fields) {
  json t = json::array();
  for (const auto& [f, type] : fields) t.push_back({{"field", f}, {"type", type}});
  return t;
}

json chart_base(const std::string& title) {
  return {{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
          {"title", title},
          {"config", {{"view", {{"stroke", nullptr}}}, {"font", "system-ui, sans-serif"}}}};
}

namespace {

json num_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// The value in a cell as text: percentages for fractions, 3 significant digits otherwise.
std::string value_format(const MetricInfo& m) {
  return m.unit.rfind("fraction", 0) == 0 ? ".0%" : ".3~s";
}

void sensitivity_chart(ChartSet& cs, const FamilyView& f, const MetricInfo& m) {
  const Regression& r = *f.regression;
  const std::string table = "sens-" + f.family;
  json rows = json::array();
  for (size_t i = 0; i < r.terms.size(); ++i)
    rows.push_back(
        {{"term", r.terms[i]},
         {"weight", r.weights[i]},
         {"scale", i < r.log2_scaled.size() ? (r.log2_scaled[i] ? "log2" : "linear") : "product"},
         {"sign", r.weights[i] >= 0 ? "positive" : "negative"}});
  cs.tables[table] = rows;
  json spec = chart_base(f.family + ": sensitivity of " + m.label);
  spec["data"] = {{"name", table}};
  spec["width"] = 360;
  spec["mark"] = {{"type", "bar"}, {"tooltip", true}};
  spec["encoding"] = {
      {"y", {{"field", "term"}, {"type", "nominal"}, {"sort", "-x"}, {"title", "hyperparameter"}}},
      {"x",
       {{"field", "weight"},
        {"type", "quantitative"},
        {"title", m.label + " per standard deviation"}}},
      {"color",
       {{"field", "sign"},
        {"type", "nominal"},
        {"scale", {{"domain", {"positive", "negative"}}, {"range", {"#3b7dd8", "#d8573b"}}}},
        {"legend", nullptr}}},
      {"tooltip",
       chart_tooltip({{"term", "nominal"}, {"weight", "quantitative"}, {"scale", "nominal"}})}};
  cs.charts.push_back(
      {chart_id("sens", f.family),
       "families",
       spec["title"].get<std::string>(),
       fmt::format("Standardized least-squares weights (inputs in standard deviations, log2 "
                   "first for geometric axes); R\u00b2 = {:.3f} over {} runs.",
                   r.r2, r.samples),
       {table},
       table,
       spec});
}

void heat_chart(ChartSet& cs, const FamilyView& f, const MetricInfo& m) {
  const HeatMap& h = *f.heat;
  const std::string table = "heat-" + f.family;
  json rows = json::array();
  for (const auto& c : h.cells)
    rows.push_back({{h.x, c.x},
                    {h.y, c.y},
                    {"value", c.value ? json(*c.value) : json(nullptr)},
                    {"status", c.status},
                    {"error", c.error},
                    {"config", c.config},
                    {"unstable", c.unstable},
                    {"runs", c.runs},
                    {"label", c.value                 ? ""
                              : c.status == "not-run" ? "\u2013"
                                                      : c.status}});
  cs.tables[table] = rows;
  std::string fixed;
  for (const auto& [k, v] : h.fixed) fixed += (fixed.empty() ? "" : ", ") + k + "=" + v;
  json spec =
      chart_base(f.family + ": " + (h.aggregated ? "median " : "") + m.label + " over " + h.x +
                 " and " + h.y + (h.aggregated ? " (over the other hyperparameters)" : ""));
  spec["data"] = {{"name", table}};
  spec["width"] = std::max<size_t>(200, 44 * h.xs.size());
  spec["height"] = std::max<size_t>(120, 26 * h.ys.size());
  const json x = {{"field", h.x}, {"type", "ordinal"}, {"sort", "ascending"}, {"title", h.x}};
  const json y = {{"field", h.y}, {"type", "ordinal"}, {"sort", "descending"}, {"title", h.y}};
  const json tip = chart_tooltip({{"config", "nominal"},
                                  {"status", "nominal"},
                                  {"value", "quantitative"},
                                  {"unstable", "nominal"},
                                  {"runs", "quantitative"},
                                  {"error", "nominal"}});
  spec["layer"] = json::array(
      {{{"transform", {{{"filter", "datum.value != null"}}}},
        {"mark", {{"type", "rect"}, {"tooltip", true}}},
        {"encoding",
         {{"x", x},
          {"y", y},
          {"color",
           {{"field", "value"},
            {"type", "quantitative"},
            // A speedup reads against 1: diverging colors centred there.
            {"scale", m.name == "speedup"
                          ? json{{"type", "log"}, {"scheme", "redblue"}, {"domainMid", 1}}
                          : json{{"scheme", "viridis"}}},
            {"title", m.label}}},
          {"tooltip", tip}}}},
       // Runs that did not fit or failed stay visibly empty, with the reason on hover.
       {{"transform", {{{"filter", "datum.value == null"}}}},
        {"mark",
         {{"type", "rect"},
          {"fill", "#f4f4f4"},
          {"stroke", "#c8c8c8"},
          {"strokeDash", {3, 2}},
          {"tooltip", true}}},
        {"encoding", {{"x", x}, {"y", y}, {"tooltip", tip}}}},
       // A value whose processes disagreed is outlined: it would not reproduce as printed.
       {{"transform", {{{"filter", "datum.unstable"}}}},
        {"mark",
         {{"type", "rect"},
          {"fillOpacity", 0},
          {"stroke", "#ff7f0e"},
          {"strokeWidth", 2.5},
          {"tooltip", true}}},
        {"encoding", {{"x", x}, {"y", y}, {"tooltip", tip}}}},
       {{"mark", {{"type", "text"}, {"fontSize", 9}}},
        {"encoding",
         {{"x", x},
          {"y", y},
          {"text",
           {{"condition",
             {{"test", "datum.value != null"}, {"field", "value"}, {"format", value_format(m)}}},
            {"field", "label"}}},
          {"color",
           {{"condition", {{"test", "datum.value == null"}, {"value", "#888"}}},
            {"value", "white"}}},
          {"tooltip", tip}}}}});
  cs.charts.push_back(
      {chart_id("heat", f.family),
       "families",
       spec["title"].get<std::string>(),
       (h.aggregated
            ? "Each cell is the median over its runs, whatever the other hyperparameters are "
              "(a sampled sweep covers no single slice); hover for the number of runs" +
                  (fixed.empty() ? std::string() : "; fixed: " + fixed)
            : "Other hyperparameters fixed at " + (fixed.empty() ? std::string("(none)") : fixed)) +
           ". Axes are the two hyperparameters with the largest absolute regression weight. "
           "Grey dashed cells did not produce a measurement; hover for the reason. Orange "
           "outlines mark unstable values: their fresh-process repetitions disagree.",
       {table},
       table,
       spec});
}

void box_chart(ChartSet& cs, const std::string& id, const std::string& section,
               const std::string& title, const std::string& caption,
               const std::vector<BoxGroup>& boxes, const std::string& axis_title, bool log_scale,
               const std::string& table) {
  json rows = json::array(), outliers = json::array();
  for (const auto& b : boxes) {
    rows.push_back({{"group", b.group},
                    {"p2", b.stats.p2},
                    {"p9", b.stats.p9},
                    {"p50", b.stats.p50},
                    {"p91", b.stats.p91},
                    {"p98", b.stats.p98},
                    {"n", b.stats.n}});
    for (size_t i = 0; i < b.stats.outliers.size(); ++i)
      outliers.push_back(
          {{"group", b.group},
           {"value", b.stats.outliers[i]},
           {"config",
            i < b.outlier_runs.size() && b.outlier_runs[i] ? b.outlier_runs[i]->config : ""}});
  }
  cs.tables[table] = rows;
  cs.tables[table + "-outliers"] = outliers;
  json spec = chart_base(title);
  spec["width"] = 420;
  const json scale = log_scale ? json{{"type", "log"}} : json{{"zero", false}};
  const json y = {{"field", "group"}, {"type", "nominal"}, {"title", nullptr}};
  const json tip = chart_tooltip({{"group", "nominal"},
                                  {"n", "quantitative"},
                                  {"p2", "quantitative"},
                                  {"p9", "quantitative"},
                                  {"p50", "quantitative"},
                                  {"p91", "quantitative"},
                                  {"p98", "quantitative"}});
  spec["layer"] = json::array(
      {{{"data", {{"name", table}}},
        {"mark", {{"type", "rule"}, {"tooltip", true}}},
        {"encoding",
         {{"y", y},
          {"x",
           {{"field", "p2"}, {"type", "quantitative"}, {"scale", scale}, {"title", axis_title}}},
          {"x2", {{"field", "p98"}}},
          {"tooltip", tip}}}},
       {{"data", {{"name", table}}},
        {"mark", {{"type", "bar"}, {"size", 14}, {"color", "#8fb3e8"}, {"tooltip", true}}},
        {"encoding",
         {{"y", y},
          {"x", {{"field", "p9"}, {"type", "quantitative"}}},
          {"x2", {{"field", "p91"}}},
          {"tooltip", tip}}}},
       {{"data", {{"name", table}}},
        {"mark", {{"type", "tick"}, {"color", "#1f3f73"}, {"size", 14}, {"thickness", 2}}},
        {"encoding",
         {{"y", y}, {"x", {{"field", "p50"}, {"type", "quantitative"}}}, {"tooltip", tip}}}},
       {{"data", {{"name", table + "-outliers"}}},
        {"mark",
         {{"type", "point"}, {"filled", true}, {"size", 18}, {"opacity", 0.6}, {"color", "#555"}}},
        {"encoding",
         {{"y", y},
          {"x", {{"field", "value"}, {"type", "quantitative"}}},
          {"tooltip", chart_tooltip({{"config", "nominal"}, {"value", "quantitative"}})}}}}});
  cs.charts.push_back({id, section, title, caption, {table, table + "-outliers"}, table, spec});
}

// The x range of a platform's roofline charts: every run, operator and ridge point, with a margin.
std::pair<double, double> roof_range(const RooflineView& v) {
  double lo = 1e30, hi = 0;
  for (const Run* r : v.runs) {
    lo = std::min(lo, r->metric("arithmetic_intensity"));
    hi = std::max(hi, r->metric("arithmetic_intensity"));
  }
  for (const auto& [prof, op] : v.ops)
    lo = std::min(lo, op->intensity()), hi = std::max(hi, op->intensity());
  for (const auto& [d, ridge] : v.ridges) lo = std::min(lo, ridge), hi = std::max(hi, ridge);
  if (hi <= 0) lo = 0.1, hi = 100;
  return {lo / 4, hi * 4};
}

// The roof lines of a platform, shared by its run and operator rooflines: each memory roof
// rises until it meets the highest measured compute roof; each compute roof runs flat from
// where the main-memory roof meets it.
std::string roof_table(ChartSet& cs, const RooflineView& v) {
  const std::string table = "roof-" + v.platform;
  const auto [lo, hi] = roof_range(v);
  double top = 0, dram = 0;
  for (const auto& r : v.roofs) {
    if (r.kind == "compute" && r.source == "measured") top = std::max(top, r.value);
    if (r.kind == "memory" && r.label.rfind("DRAM", 0) == 0) dram = r.value;
  }
  json lines = json::array();
  auto segment = [&](const Roof& r, double x0, double y0, double x1, double y1) {
    for (const auto& [x, y, order] : {std::tuple{x0, y0, 0}, std::tuple{x1, y1, 1}})
      lines.push_back({{"roof", r.label},
                       {"kind", r.kind},
                       {"source", r.source},
                       {"intensity", x},
                       {"flops", y},
                       {"order", order}});
  };
  for (const auto& r : v.roofs) {
    if (r.kind == "memory") {
      const double end = top > 0 ? std::min(hi, top / r.value) : hi;
      segment(r, lo, r.value * lo, end, r.value * end);
    } else {
      segment(r, dram > 0 ? std::max(lo, r.value / dram) : lo, r.value, hi, r.value);
    }
  }
  cs.tables[table] = lines;
  return table;
}

// The layer drawing a roof table, dashed where the roof is the specification's.
json roof_layer(const std::string& table, const json& x, const json& color) {
  return {{"data", {{"name", table}}},
          {"mark", {{"type", "line"}, {"clip", true}}},
          {"encoding",
           {{"x", x},
            {"y",
             {{"field", "flops"},
              {"type", "quantitative"},
              {"scale", {{"type", "log"}}},
              {"title", "FLOP/s"},
              {"axis", {{"format", "~s"}}}}},
            {"detail", {{"field", "roof"}}},
            {"order", {{"field", "order"}}},
            {"color", color},
            {"strokeDash",
             {{"field", "source"},
              {"type", "nominal"},
              {"scale", {{"domain", {"measured", "spec"}}, {"range", {{1, 0}, {5, 3}}}}},
              {"title", "roof source"}}},
            {"tooltip", chart_tooltip({{"roof", "nominal"}, {"source", "nominal"}})}}}};
}

// A hyperparameter's value for a color channel: a number where it is one, else its text.
json param_value(const Run& r, const std::string& key) {
  if (const auto n = r.number(key)) return *n;
  auto it = r.params.find(key);
  return it == r.params.end() ? json(nullptr) : json(it->second);
}

// A five-pointed star in Vega's unit symbol box: this Vega has no built-in "star" shape.
const char* kStarPath =
    "M0,-1L0.2245,-0.309L0.951,-0.309L0.363,0.118L0.588,0.809L0,0.382L-0.588,0.809L-0.363,0.118"
    "L-0.951,-0.309L-0.2245,-0.309Z";

// ParaDnn draws real models as labelled stars among the generated ones: the layers that
// do it over a table with a boolean "reference" and a "family" column.
json star_layers(const std::string& table, const std::string& x, const std::string& y,
                 const json& tip) {
  const json filter = {{{"filter", "datum.reference"}}};
  const json enc_x = {{"field", x}, {"type", "quantitative"}},
             enc_y = {{"field", y}, {"type", "quantitative"}};
  return json::array(
      {{{"data", {{"name", table}}},
        {"transform", filter},
        {"mark",
         {{"type", "point"},
          {"shape", kStarPath},
          {"size", 220},
          {"filled", true},
          {"color", "#f2b01e"},
          {"stroke", "#5a3d00"},
          {"strokeWidth", 1},
          {"tooltip", true}}},
        {"encoding", {{"x", enc_x}, {"y", enc_y}, {"tooltip", tip}}}},
       {{"data", {{"name", table}}},
        {"transform", filter},
        {"mark", {{"type", "text"}, {"align", "left"}, {"dx", 9}, {"dy", -7}, {"fontSize", 10}}},
        {"encoding", {{"x", enc_x}, {"y", enc_y}, {"text", {{"field", "family"}}}}}}});
}

void roofline_chart(ChartSet& cs, const RooflineView& v, const std::string& color) {
  const std::string table = roof_table(cs, v), pts = table + "-runs";
  const auto [lo, hi] = roof_range(v);
  json points = json::array();
  bool any_reference = false;
  for (const Run* r : v.runs) {
    const bool ref = is_reference_family(r->family);
    any_reference |= ref;
    points.push_back({{"config", r->config},
                      {"family", r->family},
                      {"reference", ref},
                      {"intensity", r->metric("arithmetic_intensity")},
                      {"achieved", r->metric("achieved_flops")},
                      {"utilization", num_or_null(r->metric("flops_utilization"))},
                      {color, param_value(*r, color)}});
  }
  cs.tables[pts] = points;
  json ridges = json::array();
  for (const auto& [d, x] : v.ridges)
    for (const auto& r : v.roofs)
      if (r.kind == "compute" && r.dtype == d && r.source == "measured")
        ridges.push_back({{"label", "ridge " + d + ": " + fmt::format("{:.3g}", x) + " FLOP/B"},
                          {"intensity", x},
                          {"flops", r.value}});
  cs.tables[table + "-ridges"] = ridges;
  const json xs = {{"field", "intensity"},
                   {"type", "quantitative"},
                   {"scale", {{"type", "log"}, {"domain", {lo, hi}}}},
                   {"title", "arithmetic intensity (FLOPs/byte)"},
                   {"axis", {{"format", "~s"}}}};
  json spec = chart_base(v.platform + ": roofline");
  spec["width"] = 560, spec["height"] = 360;
  spec["layer"] = json::array(
      {roof_layer(table, xs,
                  {{"field", "roof"},
                   {"type", "nominal"},
                   {"title", "roof"},
                   {"scale", {{"scheme", "tableau10"}}}}),
       {{"data", {{"name", pts}}},
        {"transform", {{{"filter", "!datum.reference"}}}},
        {"mark",
         {{"type", "point"}, {"filled", true}, {"size", 30}, {"opacity", 0.75}, {"tooltip", true}}},
        {"encoding",
         {{"x", {{"field", "intensity"}, {"type", "quantitative"}}},
          {"y", {{"field", "achieved"}, {"type", "quantitative"}}},
          {"shape", {{"field", "family"}, {"type", "nominal"}}},
          {"fill",
           {{"field", color},
            {"type", "quantitative"},
            {"scale", {{"type", "log"}, {"scheme", "plasma"}}},
            {"title", color}}},
          {"tooltip", chart_tooltip({{"config", "nominal"},
                                     {"intensity", "quantitative"},
                                     {"achieved", "quantitative"},
                                     {"utilization", "quantitative"}})}}}},
       {{"data", {{"name", table + "-ridges"}}},
        {"mark",
         {{"type", "point"},
          {"shape", "diamond"},
          {"size", 90},
          {"color", "black"},
          {"filled", true}}},
        {"encoding",
         {{"x", {{"field", "intensity"}, {"type", "quantitative"}}},
          {"y", {{"field", "flops"}, {"type", "quantitative"}}},
          {"tooltip", chart_tooltip({{"label", "nominal"}})}}}},
       {{"data", {{"name", table + "-ridges"}}},
        {"mark", {{"type", "text"}, {"align", "left"}, {"dx", 6}, {"dy", 12}, {"fontSize", 10}}},
        {"encoding",
         {{"x", {{"field", "intensity"}, {"type", "quantitative"}}},
          {"y", {{"field", "flops"}, {"type", "quantitative"}}},
          {"text", {{"field", "label"}}}}}}});
  if (any_reference)
    for (auto& layer : star_layers(pts, "intensity", "achieved",
                                   chart_tooltip({{"config", "nominal"},
                                                  {"intensity", "quantitative"},
                                                  {"achieved", "quantitative"},
                                                  {"utilization", "quantitative"}})))
      spec["layer"].push_back(layer);
  spec["resolve"] = {{"scale", {{"color", "independent"}}}};
  cs.charts.push_back(
      {chart_id("roof", v.platform),
       "rooflines",
       spec["title"].get<std::string>(),
       "Solid lines are measured roofs, dashed ones the specification's; each point is a run "
       "(analytic FLOPs and bytes per step, measured time), filled by " +
           color +
           ", shaped by family; stars are reference models. Diamonds mark the ridge "
           "points.",
       {table, pts, table + "-ridges"},
       pts,
       spec});
}

// Operators of the stored profiles under the platform's roofs (ParaDnn section 4.2): each
// point is one operator name and shape in one profiled config, per step.
void op_roofline_chart(ChartSet& cs, const RooflineView& v) {
  const std::string roofs = roof_table(cs, v), pts = "oproof-" + v.platform;
  json points = json::array();
  // Where a family marks its parts (gpt: attention scores, projections, MLP, logits), the
  // points are colored by part, so those operators stand apart under the roofs.
  bool by_part = false;
  for (const auto& [prof, op] : v.ops) by_part = by_part || !op->part.empty();
  for (const auto& [prof, op] : v.ops)
    points.push_back({{"config", prof->config},
                      {"operator", op->name},
                      {"shapes", op->shapes},
                      {"phase", op->phase},
                      {"class", op->op_class},
                      {"part", op->part.empty() ? "(no part)" : op->part},
                      {"intensity", op->intensity()},
                      {"achieved", op->achieved_flops()},
                      {"time_share", prof->step_us > 0 ? op->total_us / prof->step_us : 0.0},
                      {"flops_source", op->flops_source}});
  cs.tables[pts] = points;
  json spec = chart_base(v.platform + ": operator roofline");
  spec["width"] = 560, spec["height"] = 360;
  spec["layer"] = json::array(
      {roof_layer(roofs,
                  {{"field", "intensity"},
                   {"type", "quantitative"},
                   {"scale", {{"type", "log"}}},
                   {"title", "arithmetic intensity (FLOPs/byte)"},
                   {"axis", {{"format", "~s"}}}},
                  {{"value", "#777"}}),
       {{"data", {{"name", pts}}},
        {"mark", {{"type", "point"}, {"filled", true}, {"opacity", 0.75}, {"tooltip", true}}},
        {"encoding",
         {{"x", {{"field", "intensity"}, {"type", "quantitative"}}},
          {"y", {{"field", "achieved"}, {"type", "quantitative"}}},
          {"color",
           {{"field", by_part ? "part" : "class"},
            {"type", "nominal"},
            {"scale", {{"scheme", "category10"}}},
            {"title", by_part ? "model part" : "operator class"}}},
          {"shape", {{"field", "phase"}, {"type", "nominal"}}},
          {"size", {{"field", "time_share"}, {"type", "quantitative"}, {"title", "share of step"}}},
          {"tooltip", chart_tooltip({{"operator", "nominal"},
                                     {"shapes", "nominal"},
                                     {"phase", "nominal"},
                                     {"part", "nominal"},
                                     {"config", "nominal"},
                                     {"achieved", "quantitative"},
                                     {"intensity", "quantitative"},
                                     {"time_share", "quantitative"}})}}}}});
  cs.charts.push_back(
      {chart_id("oproof", v.platform),
       "profiles",
       v.platform + ": operator roofline",
       std::string("Each point is an operator (name and input shapes) of a profiled config: "
                   "analytic FLOPs and bytes over its measured time, sized by its share of the "
                   "step, shaped by phase, colored by ") +
           (by_part ? "model part (attention scores, projections, MLP, logits; backward "
                      "operators in their forward operator's part)."
                    : "class."),
       {roofs, pts},
       pts,
       spec});
}

void profile_breakdown_chart(ChartSet& cs, const std::vector<ProfileRow>& profiles) {
  json rows = json::array();
  for (const auto& pr : profiles) {
    double total = 0;
    const auto classes = pr.profile.class_self_us();
    for (const auto& [c, us] : classes) total += us;
    for (const auto& [c, us] : classes)
      rows.push_back({{"config", pr.profile.config},
                      {"platform", pr.platform},
                      {"class", c},
                      {"self_us", us},
                      {"share", total > 0 ? us / total : 0.0}});
  }
  cs.tables["profile-classes"] = rows;
  json spec = chart_base("Step time by operator class");
  spec["data"] = {{"name", "profile-classes"}};
  spec["width"] = 520;
  spec["mark"] = {{"type", "bar"}, {"tooltip", true}};
  spec["encoding"] = {{"y",
                       {{"field", "config"},
                        {"type", "nominal"},
                        {"title", nullptr},
                        {"axis", {{"labelLimit", 420}}}}},
                      {"x",
                       {{"field", "self_us"},
                        {"type", "quantitative"},
                        {"stack", "normalize"},
                        {"title", "share of operator self time"},
                        {"axis", {{"format", "%"}}}}},
                      {"color",
                       {{"field", "class"},
                        {"type", "nominal"},
                        {"scale", {{"scheme", "category10"}}},
                        {"title", "operator class"}}},
                      {"tooltip", chart_tooltip({{"config", "nominal"},
                                                 {"class", "nominal"},
                                                 {"self_us", "quantitative"},
                                                 {"share", "quantitative"}})}};
  cs.charts.push_back({chart_id("opclass"),
                       "profiles",
                       "Step time by operator class",
                       "Self time of every operator per step, summed by class, as a share of the "
                       "step (profiled steps; "
                       "the profiler's own overhead is included).",
                       {"profile-classes"},
                       "profile-classes",
                       spec});
}

// TBD Fig. 8: measured memory by category at the moment the total peaked.
void memory_chart(ChartSet& cs, const std::vector<MemoryRow>& memory) {
  json rows = json::array();
  for (const auto& m : memory) {
    const auto& b = m.breakdown;
    if (!b.contains("categories")) continue;
    for (const auto& [cat, v] : b["categories"].items())
      rows.push_back(
          {{"config", b.value("config", "")},
           {"platform", m.platform},
           {"category", cat},
           {"bytes", v.value("at_peak_bytes", 0.0)},
           {"peak_bytes", v.value("peak_bytes", 0.0)},
           {"estimate_bytes", v.contains("estimate_bytes") ? v["estimate_bytes"] : json(nullptr)}});
  }
  cs.tables["memory"] = rows;
  json spec = chart_base("Memory by category at the step's peak");
  spec["data"] = {{"name", "memory"}};
  spec["width"] = 520;
  spec["mark"] = {{"type", "bar"}, {"tooltip", true}};
  spec["encoding"] = {
      {"y",
       {{"field", "config"},
        {"type", "nominal"},
        {"title", nullptr},
        {"axis", {{"labelLimit", 420}}}}},
      {"x",
       {{"field", "bytes"},
        {"type", "quantitative"},
        {"stack", "zero"},
        {"title", "bytes"},
        {"axis", {{"format", "~s"}}}}},
      {"color", {{"field", "category"}, {"type", "nominal"}, {"scale", {{"scheme", "tableau10"}}}}},
      {"tooltip", chart_tooltip({{"config", "nominal"},
                                 {"category", "nominal"},
                                 {"bytes", "quantitative"},
                                 {"peak_bytes", "quantitative"},
                                 {"estimate_bytes", "quantitative"}})}};
  cs.charts.push_back(
      {chart_id("memory"),
       "profiles",
       "Memory by category at the step's peak",
       "Measured by trainbench's counting allocator over one steady-state step (trainbench memory "
       "--store); hover for each category's own peak and the cost model's estimate.",
       {"memory"},
       "memory",
       spec});
}

void comparison_charts(ChartSet& cs, const ComparisonView& c, const std::string& color) {
  // One axis may be compared several times (each stack against the baseline).
  const std::string key = c.axis + "_" + c.b;
  const std::string table = "cmp-" + key;
  // Software stacks get a page of their own (ParaDnn section 6); other axes share one.
  const std::string section = comparison_section(c.axis);
  json rows = json::array();
  for (const auto& p : c.points) {
    rows.push_back({{"config", p.config},
                    {"family", p.family},
                    {"speedup", *p.value},
                    {"params", p.run ? num_or_null(p.run->metric("params")) : json(nullptr)},
                    // The compared parameter itself is not in p.params: no color by it.
                    {color, p.params.count(color) ? param_value(*p.run, color) : json(nullptr)}});
  }
  cs.tables[table] = rows;
  const std::string title = c.axis + ": " + c.b + " over " + c.a;
  json spec = chart_base(title + ", speedup vs model size");
  spec["width"] = 520, spec["height"] = 300;
  spec["layer"] = json::array(
      {{{"data", {{"name", table}}},
        {"mark",
         {{"type", "point"}, {"filled", true}, {"size", 30}, {"opacity", 0.75}, {"tooltip", true}}},
        {"encoding",
         {{"x",
           {{"field", "params"},
            {"type", "quantitative"},
            {"scale", {{"type", "log"}}},
            {"title", "trainable parameters"},
            {"axis", {{"format", "~s"}}}}},
          {"y",
           {{"field", "speedup"},
            {"type", "quantitative"},
            {"scale", {{"type", "log"}}},
            {"title", "speedup of " + c.b + " over " + c.a}}},
          {"shape", {{"field", "family"}, {"type", "nominal"}}},
          {"fill",
           {{"field", color},
            {"type", "quantitative"},
            {"scale", {{"type", "log"}, {"scheme", "plasma"}}},
            {"title", color}}},
          {"tooltip", chart_tooltip({{"config", "nominal"},
                                     {"speedup", "quantitative"},
                                     {"params", "quantitative"}})}}}},
       {{"data", {{"values", json::array({{{"y", 1}}})}}},
        {"mark", {{"type", "rule"}, {"strokeDash", {4, 3}}, {"color", "#555"}}},
        {"encoding", {{"y", {{"field", "y"}, {"type", "quantitative"}}}}}}});
  cs.charts.push_back(
      {chart_id("cmp", key),
       section,
       title,
       fmt::format(
           "{} matched configs; geometric-mean speedup {:.3f}; {} faster on {:.0f}% of "
           "them. Only configs measured on both sides count ({} only on {}, {} only on {}).",
           c.stats.matched.size(), c.stats.geomean, c.b, 100 * c.stats.share_b_faster,
           c.stats.only_a, c.a, c.stats.only_b, c.b),
       {table},
       table,
       spec});
  box_chart(cs, chart_id("cmpbox", key), section, title + ", speedup by family",
            "Speedup per family: whiskers at the 2nd and 98th percentiles, box 9th to 91st, tick "
            "at the median.",
            box_groups(c.points), "speedup", true, table + "-box");
  for (const auto& [fam, r] : c.regression_by_family) {
    FamilyView f;
    f.family = fam + " (" + c.b + " over " + c.a + ")";
    f.regression = r;
    MetricInfo m{"speedup", "speedup of " + c.b + " over " + c.a, "x", true};
    sensitivity_chart(cs, f, m);
    cs.charts.back().section = section;
    cs.charts.back().id = chart_id("cmpsens", key + "_" + fam);
    if (c.heat_by_family.count(fam)) {
      f.heat = c.heat_by_family.at(fam);
      heat_chart(cs, f, m);
      cs.charts.back().section = section;
      cs.charts.back().id = chart_id("cmpheat", key + "_" + fam);
    }
  }
}

void scaling_chart(ChartSet& cs, const std::vector<ScalingSeries>& series) {
  json rows = json::array();
  for (const auto& s : series)
    for (const auto& [n, thr] : s.throughput)
      rows.push_back(
          {{"series", s.key},
           {"config", s.configs.at(n)},
           {"count", n},
           {"scaled", s.param},
           {"examples_per_s", thr},
           {"speedup", s.throughput.count(1) ? json(thr / s.throughput.at(1)) : json(nullptr)},
           {"utilization", s.utilization.count(n) ? json(s.utilization.at(n)) : json(nullptr)},
           {"serial_fraction", num_or_null(s.serial_fraction)}});
  cs.tables["scaling"] = rows;
  json spec = chart_base("Throughput vs threads and workers");
  spec["data"] = {{"name", "scaling"}};
  spec["hconcat"] = json::array();
  for (const auto& [field, title] : std::vector<std::pair<std::string, std::string>>{
           {"examples_per_s", "examples/s"}, {"utilization", "FLOPS utilization"}})
    spec["hconcat"].push_back(
        {{"width", 300},
         {"height", 220},
         {"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
         {"encoding",
          {{"x", {{"field", "count"}, {"type", "ordinal"}, {"title", "threads or workers"}}},
           {"y", {{"field", field}, {"type", "quantitative"}, {"title", title}}},
           {"color", {{"field", "series"}, {"type", "nominal"}, {"legend", nullptr}}},
           {"tooltip", chart_tooltip({{"config", "nominal"},
                                      {"examples_per_s", "quantitative"},
                                      {"utilization", "quantitative"},
                                      {"serial_fraction", "quantitative"}})}}}});
  cs.charts.push_back(
      {chart_id("scaling"),
       "scaling",
       "Throughput and FLOPS utilization vs threads and workers",
       "Each line is one experiment measured at several thread counts; hover for Amdahl's fitted "
       "non-parallel fraction.",
       {"scaling"},
       "scaling",
       spec});
}

// ParaDnn Figs. 1, 3, 5: FLOPS utilization (or achieved FLOP/s without a platform peak)
// against model size and work per step, generated models as points, reference models as
// labelled stars.
void reference_scatter_chart(ChartSet& cs, const RunSet& runs) {
  std::vector<const Run*> ok;
  bool has_util = false;
  for (const auto& r : runs.runs)
    if (r.ok() && std::isfinite(r.metric("params")) && r.metric("params") > 0 &&
        std::isfinite(r.metric("flops_per_step")) && r.metric("flops_per_step") > 0) {
      ok.push_back(&r);
      has_util |= std::isfinite(r.metric("flops_utilization"));
    }
  const std::string y = has_util ? "flops_utilization" : "achieved_flops";
  json rows = json::array();
  for (const Run* r : ok) {
    if (!std::isfinite(r->metric(y))) continue;
    rows.push_back({{"config", r->config},
                    {"family", r->family},
                    {"reference", is_reference_family(r->family)},
                    {"params", r->metric("params")},
                    {"flops_per_step", r->metric("flops_per_step")},
                    {"value", r->metric(y)}});
  }
  if (rows.empty()) return;
  cs.tables["ref-scatter"] = rows;
  const MetricInfo& m = metric_info(y);
  const json tip = chart_tooltip({{"config", "nominal"},
                                  {"params", "quantitative"},
                                  {"flops_per_step", "quantitative"},
                                  {"value", "quantitative"}});
  json spec = chart_base(m.label + " vs model size: reference models among the generated ones");
  spec["hconcat"] = json::array();
  for (const auto& [x, title] : std::vector<std::pair<std::string, std::string>>{
           {"params", "trainable parameters"}, {"flops_per_step", "FLOPs per training step"}}) {
    json panel = {{"width", 300}, {"height", 240}};
    panel["layer"] = json::array(
        {{{"data", {{"name", "ref-scatter"}}},
          {"transform", {{{"filter", "!datum.reference"}}}},
          {"mark",
           {{"type", "point"},
            {"filled", true},
            {"size", 24},
            {"opacity", 0.6},
            {"tooltip", true}}},
          {"encoding",
           {{"x",
             {{"field", x},
              {"type", "quantitative"},
              {"scale", {{"type", "log"}}},
              {"title", title},
              {"axis", {{"format", "~s"}}}}},
            {"y",
             {{"field", "value"},
              {"type", "quantitative"},
              {"title", m.label},
              {"axis", {{"format", m.unit.rfind("fraction", 0) == 0 ? "%" : "~s"}}}}},
            {"color", {{"field", "family"}, {"type", "nominal"}, {"title", "generated family"}}},
            {"tooltip", tip}}}}});
    for (auto& layer : star_layers("ref-scatter", x, "value", tip)) panel["layer"].push_back(layer);
    spec["hconcat"].push_back(panel);
  }
  cs.charts.push_back({chart_id("refscatter"),
                       "reference",
                       spec["title"].get<std::string>(),
                       "Each point is a measured run of a generated family; stars are reference "
                       "models, labelled (ParaDnn Figs. 1, 3, 5). FLOPs of models without a cost "
                       "description are the profiler's.",
                       {"ref-scatter"},
                       "ref-scatter",
                       spec});
}

// TBD Figs. 4-6: each reference model's throughput, in its own unit, and its FLOPS and
// CPU utilization, against the mini-batch size.
// The x encoding of TBD's per-batch-size charts.
json batch_axis() {
  return {{"field", "batch"},
          {"type", "quantitative"},
          {"scale", {{"type", "log"}, {"base", 2}}},
          {"title", "mini-batch size"}};
}

void reference_batch_charts(ChartSet& cs, const std::vector<const Run*>& refs) {
  json rows = json::array(), util = json::array();
  for (const Run* r : refs) {
    const auto batch = r->number("batch");
    if (!batch) continue;
    const double thr = r->throughput();
    rows.push_back({{"model", r->family + " (" + r->throughput_unit + "/s)"},
                    {"family", r->family},
                    {"platform", r->platform},
                    {"config", r->config},
                    {"batch", *batch},
                    {"throughput", num_or_null(thr)},
                    {"unit", r->throughput_unit}});
    for (const auto& [metric, label] : std::vector<std::pair<std::string, std::string>>{
             {"flops_utilization", "FLOPS utilization"}, {"cpu_utilization", "CPU utilization"}})
      if (std::isfinite(r->metric(metric)))
        util.push_back({{"family", r->family},
                        {"platform", r->platform},
                        {"config", r->config},
                        {"batch", *batch},
                        {"kind", label},
                        {"value", r->metric(metric)}});
  }
  if (rows.empty()) return;
  cs.tables["ref-throughput"] = rows;
  cs.tables["ref-utilization"] = util;
  json spec = chart_base("Reference models: throughput vs mini-batch size");
  spec["data"] = {{"name", "ref-throughput"}};
  spec["facet"] = {{"field", "model"}, {"type", "nominal"}, {"title", nullptr}};
  spec["columns"] = 3;
  spec["resolve"] = {{"scale", {{"y", "independent"}, {"x", "independent"}}}};
  spec["spec"] = {{"width", 220},
                  {"height", 160},
                  {"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
                  {"encoding",
                   {{"x", batch_axis()},
                    {"y",
                     {{"field", "throughput"},
                      {"type", "quantitative"},
                      {"title", "throughput (unit/s)"},
                      {"axis", {{"format", "~s"}}}}},
                    {"color", {{"field", "platform"}, {"type", "nominal"}}},
                    {"tooltip", chart_tooltip({{"config", "nominal"},
                                               {"throughput", "quantitative"},
                                               {"unit", "nominal"},
                                               {"platform", "nominal"}})}}}};
  cs.charts.push_back({chart_id("refthroughput"),
                       "reference",
                       spec["title"].get<std::string>(),
                       "One panel per model, throughput in the model's own unit (images, tokens, "
                       "seconds of audio, frames) per second, as TBD Figs. 4-6.",
                       {"ref-throughput"},
                       "ref-throughput",
                       spec});
  if (util.empty()) return;
  json uspec = chart_base("Reference models: utilization vs mini-batch size");
  uspec["data"] = {{"name", "ref-utilization"}};
  uspec["facet"] = {{"field", "kind"}, {"type", "nominal"}, {"title", nullptr}};
  uspec["resolve"] = {{"scale", {{"y", "independent"}}}};
  uspec["spec"] = {{"width", 280},
                   {"height", 200},
                   {"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
                   {"encoding",
                    {{"x", batch_axis()},
                     {"y",
                      {{"field", "value"},
                       {"type", "quantitative"},
                       {"title", "utilization"},
                       {"axis", {{"format", "%"}}}}},
                     {"color", {{"field", "family"}, {"type", "nominal"}, {"title", "model"}}},
                     {"detail", {{"field", "platform"}}},
                     {"tooltip", chart_tooltip({{"config", "nominal"},
                                                {"kind", "nominal"},
                                                {"value", "quantitative"},
                                                {"platform", "nominal"}})}}}};
  cs.charts.push_back({chart_id("refutil"),
                       "reference",
                       uspec["title"].get<std::string>(),
                       "FLOPS utilization (against the platform's peak) and CPU utilization (busy "
                       "cores over all cores, TBD eq. 3) of each reference model per batch size.",
                       {"ref-utilization"},
                       "ref-utilization",
                       uspec});
}

}  // namespace

ChartSet build_charts(const RunSet& runs, const Summary& s, const ChartOptions& o) {
  ChartSet cs;
  const MetricInfo& m = metric_info(s.metric);
  for (const auto& f : s.families) {
    if (f.regression) sensitivity_chart(cs, f, m);
    if (f.heat) heat_chart(cs, f, m);
  }
  if (!s.boxes.empty())
    box_chart(cs, chart_id("box"), "distributions", m.label + " by family",
              "Whiskers at the 2nd and 98th percentiles, box from the 9th to the 91st, tick at the "
              "median "
              "(ParaDnn's percentiles); dots are the runs outside the whiskers.",
              s.boxes, m.label, false, "box");
  for (const auto& v : s.rooflines)
    if (!v.runs.empty()) roofline_chart(cs, v, o.color_param);
  for (const auto& v : s.rooflines)
    if (!v.ops.empty()) op_roofline_chart(cs, v);
  if (!runs.profiles.empty()) profile_breakdown_chart(cs, runs.profiles);
  if (!runs.memory.empty()) memory_chart(cs, runs.memory);
  for (const auto& c : s.comparisons)
    if (!c.points.empty()) comparison_charts(cs, c, o.color_param);
  if (!s.scaling.empty()) scaling_chart(cs, s.scaling);
  const auto refs = reference_runs(runs, /*ok_only=*/true);
  if (!refs.empty()) {
    reference_scatter_chart(cs, runs);
    reference_batch_charts(cs, refs);
  }
  return cs;
}

}  // namespace tb
