#include "analysis/published.h"

#include <csv.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "base/files.h"
#include "cost/cost.h"
#include "platform/registry.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"
#include "spec/family.h"
#include "spec/printable.h"

namespace tb::sim {
namespace {

// The records of a CSV file (RFC 4180: quoted fields may hold commas and quotes), through
// libcsv.
std::vector<std::vector<std::string>> csv_records(const std::string& path) {
  if (is_directory(path))
    throw UsageError("published throughputs '" + printable(path) + "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot open published throughputs '" + printable(path) + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  struct State {
    std::vector<std::vector<std::string>> records;
    std::vector<std::string> current;
  } state;
  csv_parser p;
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0)
    throw std::runtime_error("libcsv: cannot initialize");
  auto field = [](void* s, size_t n, void* data) {
    static_cast<State*>(data)->current.emplace_back(static_cast<const char*>(s), n);
  };
  auto record = [](int, void* data) {
    auto* st = static_cast<State*>(data);
    st->records.push_back(std::move(st->current));
    st->current.clear();
  };
  const size_t used = csv_parse(&p, text.data(), text.size(), field, record, &state);
  const bool ok = used == text.size() && csv_fini(&p, field, record, &state) == 0;
  const std::string why = ok ? "" : csv_strerror(csv_error(&p));
  csv_free(&p);
  if (!ok)
    throw UsageError(fmt::format("{}: not a valid CSV file (after {} rows): {}", printable(path),
                                 state.records.size(), why));
  return state.records;
}

double positive_number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) return -1;
  return v;
}

const std::set<std::string> kExampleUnits = {"examples/s", "images/s", "img/s", "sequences/s",
                                             "samples/s"};
// Target tokens per second, as fairseq and DeepLearningExamples' translation models count them.
const std::set<std::string> kTokenUnits = {"tokens/s", "tok/s"};

}  // namespace

std::string shipped_published_path() {
  return std::string(TB_DATA_DIR) + "/published/training-throughput.csv";
}

std::string shipped_measured_path() {
  return std::string(TB_DATA_DIR) + "/measured/training-throughput.csv";
}

std::vector<PublishedRow> read_published(const std::string& path) {
  const auto records = csv_records(path);
  if (records.empty()) throw UsageError(printable(path) + ": empty (expected a header line)");
  const std::vector<std::string> required = {"config", "throughput", "platform", "format",
                                             "batch",  "unit",       "source"};
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < records[0].size(); ++i) {
    const std::string& name = records[0][i];
    if (name != "note" && name != "layout" &&
        std::find(required.begin(), required.end(), name) == required.end())
      throw UsageError(
          fmt::format("{}:1: unknown column '{}' (columns: config, platform, "
                      "format, batch, throughput, unit, source, layout, note)",
                      printable(path), printable(name)));
    column[name] = i;
  }
  for (const auto& name : required)
    if (!column.count(name))
      throw UsageError(fmt::format("{}:1: missing column '{}'", printable(path), name));

  std::vector<PublishedRow> rows;
  std::map<std::string, PlatformDescription> platforms;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec.size() == 1 && rec[0].empty()) continue;  // a blank line
    const int line = int(r) + 1;
    auto fail = [&](const std::string& field, const std::string& why) {
      throw UsageError(
          fmt::format("{}:{}: field '{}': {}", printable(path), line, field, printable(why)));
    };
    if (rec.size() != records[0].size())
      fail("config",
           fmt::format("{} fields where the header has {}", rec.size(), records[0].size()));
    auto get = [&](const std::string& name) {
      const auto it = column.find(name);
      return it == column.end() ? std::string() : rec[it->second];
    };
    PublishedRow row;
    row.line = line;
    row.platform = get("platform");
    row.format = get("format");
    row.unit = get("unit");
    row.source = get("source");
    row.note = get("note");
    row.layout = get("layout").empty() ? "nhwc" : get("layout");
    if (!known_layout(row.layout)) fail("layout", "'" + row.layout + "' (expected nhwc or nchw)");
    const double batch = positive_number(get("batch"));
    if (batch < 1 || batch != std::floor(batch))
      fail("batch", "expected a positive integer, got '" + get("batch") + "'");
    row.batch = int64_t(batch);
    row.throughput = positive_number(get("throughput"));
    if (row.throughput <= 0)
      fail("throughput", "expected a positive number, got '" + get("throughput") + "'");
    row.tokens = kTokenUnits.count(row.unit) > 0;
    if (!row.tokens && !kExampleUnits.count(row.unit))
      fail("unit", "'" + row.unit +
                       "': expected examples per second, a step being `batch` examples "
                       "(examples/s, images/s, img/s, sequences/s, samples/s), or tokens per "
                       "second, a step being `batch` tokens (tokens/s, tok/s)");
    if (row.source.empty()) fail("source", "say where the figure comes from");
    std::optional<Config> c;
    try {
      // A tokens row's batch counts tokens; the config's own batch and seq say how they are
      // shaped into sentences.
      c = row.tokens ? parse_config(get("config"))
                     : parse_config(get("config"), {{"batch", std::to_string(row.batch)}});
    } catch (const UsageError& e) {
      fail("config", e.what());
    }
    if (!has_cost(c->family()))
      fail("config", "family '" + c->family() + "' has no cost description to predict from");
    if (row.tokens) {
      const FamilySchema* schema = find_family_schema(c->family());
      if (!schema || schema->throughput_unit != "tokens" || !c->has("seq"))
        fail("unit", "'" + row.unit + "': family '" + c->family() +
                         "' does not count tokens by batch x seq (transformer and gpt do)");
      // The step computes batch x seq (padded) tokens per side; the source's step is `batch`
      // tokens: the two must be the same step.
      const int64_t padded = c->get_int("batch") * c->get_int("seq");
      if (padded != row.batch)
        fail("batch",
             fmt::format("{} tokens per step, but the config's batch x seq is {} x {} = {}",
                         row.batch, c->get_int("batch"), c->get_int("seq"), padded));
    }
    row.config = c->str();
    try {
      if (!platforms.count(row.platform)) platforms[row.platform] = find_platform(row.platform);
    } catch (const UsageError& e) {
      fail("platform", e.what());
    }
    try {
      resolve_format(platforms.at(row.platform), row.format);
    } catch (const UsageError& e) {
      fail("format", e.what());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Validation> validate_published(const std::vector<PublishedRow>& rows) {
  std::vector<Validation> out;
  std::map<std::string, PlatformDescription> platforms;
  for (const auto& row : rows) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Validation& v) { return v.platform == row.platform; });
    if (it == out.end()) {
      platforms[row.platform] = find_platform(row.platform);
      Validation v;
      v.platform = row.platform;
      v.model = platforms[row.platform].efficiency
                    ? "roofline with the description's efficiency"
                    : "roofline from the description's peaks and bandwidth (no efficiency)";
      out.push_back(std::move(v));
      it = out.end() - 1;
    }
    const Config c = parse_config(row.config);
    SimOptions o;
    o.layout = row.layout;
    const Simulation s = simulate_config(platforms.at(row.platform), c, row.format, o);
    ValidationPoint p{
        row.config, c.family(), row.platform, s.step_s, double(row.batch) / row.throughput,
        s.bound()};
    p.format = row.format;
    p.source = row.source;
    p.batch = row.batch;
    p.unit = row.tokens ? "tokens/s" : "examples/s";
    it->points.push_back(std::move(p));
  }
  for (auto& v : out) {
    v.all = error_stats(v.points);
    std::map<std::string, std::vector<ValidationPoint>> fam;
    for (const auto& p : v.points) fam[p.family].push_back(p);
    for (const auto& [f, pts] : fam) v.per_family[f] = error_stats(pts);
  }
  return out;
}

namespace {
// A recipe's rows check it whatever its scaling's parameters (a margin, a history length): the
// format text up to the scaling's first ':' after '@'.
std::string recipe_kind(const std::string& format) {
  const size_t at = format.find('@');
  return at == std::string::npos ? format : format.substr(0, format.find(':', at));
}
}  // namespace

std::string validation_phrase(const std::string& platform, const std::string& format) {
  std::vector<std::string> parts;
  std::vector<ValidationPoint> in_format;  // both files' points in the format's recipe
  for (const auto& [path, kind] : {std::pair{shipped_published_path(), "published"},
                                   std::pair{shipped_measured_path(), "measured"}}) {
    std::vector<PublishedRow> rows;
    try {
      for (auto& r : read_published(path))
        if (r.platform == platform) rows.push_back(std::move(r));
    } catch (const UsageError& e) {
      return "simulator not validated (" + std::string(e.what()) + ")";
    }
    if (rows.empty()) continue;
    const Validation v = validate_published(rows).at(0);
    for (const auto& pt : v.points)
      if (!format.empty() && recipe_kind(pt.format) == recipe_kind(format)) in_format.push_back(pt);
    const ErrorStats& s = v.all;
    parts.push_back(fmt::format("median {:.0f}%, p90 {:.0f}% over {} {} row{}", 100 * s.median,
                                100 * s.p90, s.n, kind, s.n == 1 ? "" : "s"));
  }
  if (parts.empty())
    return "simulator not validated on " + platform + " (no published or measured rows)";
  std::string in;
  if (!format.empty() && in_format.empty()) in = fmt::format("; no row in {}", format);
  if (!in_format.empty()) {
    const ErrorStats s = error_stats(in_format);
    in = fmt::format("; in {}: median {:.0f}%, p90 {:.0f}% over {} row{}", format, 100 * s.median,
                     100 * s.p90, s.n, s.n == 1 ? "" : "s");
  }
  return fmt::format("simulator error on {}: {}{}", platform, fmt::join(parts, "; "), in);
}

std::string format_published(const std::vector<Validation>& vs) {
  std::string o =
      fmt::format("{:<16} {:<9} {:>6} {:>12} {:>12} {:<8} {:>8} {:>8}  {}\n", "platform", "format",
                  "batch", "published", "predicted", "per s", "error", "bound", "config");
  std::vector<ValidationPoint> all;
  for (const auto& v : vs)
    for (const auto& p : v.points) {
      all.push_back(p);
      o += fmt::format(
          "{:<16} {:<9} {:>6} {:>12.1f} {:>12.1f} {:<8} {:>7.1f}% {:>8}  {}\n", v.platform,
          p.format, p.batch, double(p.batch) / p.measured_s, double(p.batch) / p.predicted_s,
          p.unit == "tokens/s" ? "tokens" : "examples", 100 * p.error(), p.bound, p.config);
    }
  // The ratio is of step times, the table above of throughputs: the header says which.
  o += fmt::format("\n{:<20} {:>5} {:>13} {:>11} {:>27}\n", "platform", "rows", "median error",
                   "p90 error", "median step predicted/pub.");
  auto row = [&](const std::string& name, const ErrorStats& s) {
    o += fmt::format("{:<20} {:>5} {:>12.1f}% {:>10.1f}% {:>27.3f}\n", name, s.n, 100 * s.median,
                     100 * s.p90, s.median_ratio);
  };
  for (const auto& v : vs) row(v.platform, v.all);
  std::map<std::string, std::vector<ValidationPoint>> by_family;
  for (const auto& p : all) by_family[p.family].push_back(p);
  if (by_family.size() > 1)
    for (const auto& [family, points] : by_family) row("family " + family, error_stats(points));
  row("all", error_stats(all));
  o += "(a step time predicted/published below 1, a predicted throughput above the published: the "
       "model is optimistic)\n";
  return o;
}

}  // namespace tb::sim
