#include "platform/description.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <tuple>

#include "base/errors.h"
#include "base/files.h"

namespace tb {
namespace {

using nlohmann::json;

const std::set<std::string> kDtypes = {"fp64", "fp32", "tf32", "fp16",
                                       "bf16", "fp8",  "int8", "fp4"};
const std::set<std::string> kKinds = {"cpu", "gpu", "tpu", "accelerator"};
// The `optimizer` config values (runner.cc's make_optimizer).
const std::set<std::string> kOptimizers = {"sgd", "momentum", "adam", "adamw", "rmsprop"};
const std::set<std::string> kLayerCallOps = {"batchnorm", "maxpool", "avgpool", "relu", "add"};
const std::set<std::string> kCacheLevels = {"l1", "l2", "l3"};
// Keys trainbench itself writes into measured descriptions, kept as they are.
const std::set<std::string> kMeasuredKeys = {"kind_of_document",
                                             "measured_at",
                                             "spec_peak_tflops",
                                             "spec_peak_formula",
                                             "spec_peak_verified",
                                             "spec_peak_caveat",
                                             "machine",
                                             "measurements",
                                             "fingerprint",
                                             "notes"};
const std::set<std::string> kKnownKeys = {"schema_version", "name",
                                          "description",    "kind",
                                          "source",         "cores",
                                          "memory_gb",      "memory_bandwidth_gbps",
                                          "peak_tflops",    "cache_bandwidth_gbps",
                                          "systolic_array", "efficiency",
                                          "runs_as"};

struct Reader {
  const json& j;
  std::string origin;
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw UsageError(fmt::format("{}: field '{}': {}", origin, field, why));
  }
  const json* get(const std::string& key, bool required) const {
    if (!j.contains(key)) {
      if (required) fail(key, "missing");
      return nullptr;
    }
    return &j.at(key);
  }
  std::string str(const std::string& key, bool required) const {
    const json* v = get(key, required);
    if (!v) return "";
    if (!v->is_string()) fail(key, "expected a string, got " + v->dump());
    return v->get<std::string>();
  }
  // Zero is a statement for a cost (none), unlike the roofs, which must be positive.
  double microseconds(const json& v, const std::string& field, int max_exponent = 6) const {
    const double max = std::pow(10.0, max_exponent);
    if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > max)
      fail(field,
           fmt::format("expected microseconds in [0, 1e{}], got {}", max_exponent, v.dump()));
    return v.get<double>();
  }
  double positive(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
    const double d = v.get<double>();
    if (!(d > 0) || d > 1e12) fail(field, fmt::format("must be positive and finite, got {}", d));
    return d;
  }
  std::map<std::string, double> table(const std::string& key, const std::set<std::string>& keys,
                                      bool required) const {
    std::map<std::string, double> out;
    const json* v = get(key, required);
    if (!v) return out;
    if (!v->is_object() || (required && v->empty()))
      fail(key, "expected a non-empty object, got " + v->dump());
    for (const auto& [k, value] : v->items()) {
      if (!keys.count(k)) {
        std::string names;
        for (const auto& n : keys) names += (names.empty() ? "" : ", ") + n;
        fail(key + "." + k, "unknown key (expected one of " + names + ")");
      }
      out[k] = positive(value, key + "." + k);
    }
    return out;
  }
};

PlatformDescription::Efficiency parse_efficiency(const json& e, const Reader& r) {
  if (!e.is_object()) r.fail("efficiency", "expected an object, got " + e.dump());
  PlatformDescription::Efficiency out;
  for (const auto& [k, v] : e.items()) {
    const std::string field = "efficiency." + k;
    if (k == "op_overhead_us") {
      out.op_overhead_us = r.microseconds(v, field);
    } else if (k == "host_op_us") {
      out.host_op_us = r.microseconds(v, field);
    } else if (k == "host_step_us") {
      out.host_step_us = r.microseconds(v, field, 7);
    } else if (k == "gemm_alignment") {
      if (!v.is_object()) r.fail(field, "expected an object of dtypes, got " + v.dump());
      for (const auto& [dtype, by] : v.items()) {
        const std::string df = field + "." + dtype;
        if (!kDtypes.count(dtype)) r.fail(df, "unknown dtype (expected one of peak_tflops' keys)");
        if (!by.is_object() || by.empty())
          r.fail(df, "expected an object of alignments in bytes (1, 2, 4, 8), got " + by.dump());
        for (const auto& [bytes, f] : by.items()) {
          if (bytes != "1" && bytes != "2" && bytes != "4" && bytes != "8")
            r.fail(df + "." + bytes, "unknown alignment (expected 1, 2, 4 or 8 bytes)");
          if (!f.is_number() || !(f.get<double>() > 0) || f.get<double>() > 1)
            r.fail(df + "." + bytes, "expected a fraction in (0, 1], got " + f.dump());
          out.gemm_alignment[dtype][std::stoi(bytes)] = f.get<double>();
        }
      }
    } else if (k == "conv_call_us") {
      out.conv_call_us = r.microseconds(v, field);
    } else if (k == "memory_fraction") {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1)
        r.fail(field, "expected a number in (0, 1], got " + v.dump());
      out.memory_fraction = v.get<double>();
    } else if (k == "gemm" || k == "conv") {
      if (!v.is_object()) r.fail(field, "expected an object of dtypes, got " + v.dump());
      for (const auto& [dtype, pts] : v.items()) {
        const std::string df = field + "." + dtype;
        if (!kDtypes.count(dtype)) r.fail(df, "unknown dtype (expected one of peak_tflops' keys)");
        if (!pts.is_array() || pts.empty())
          r.fail(df, "expected a non-empty array of {\"n\", \"fraction_of_peak\"}");
        std::vector<PlatformDescription::GemmPoint> curve;
        for (size_t i = 0; i < pts.size(); ++i) {
          const std::string pf = fmt::format("{}[{}]", df, i);
          const json& pt = pts[i];
          if (!pt.is_object() || pt.size() != 2 || !pt.contains("n") ||
              !pt.contains("fraction_of_peak"))
            r.fail(pf, "expected {\"n\": size, \"fraction_of_peak\": f}, got " + pt.dump());
          const json &n = pt["n"], &f = pt["fraction_of_peak"];
          if (!n.is_number_integer() || n.get<int64_t>() <= 0 || n.get<int64_t>() > 10000000)
            r.fail(pf + ".n", "expected a positive integer, got " + n.dump());
          if (!f.is_number() || !(f.get<double>() > 0) || f.get<double>() > 1)
            r.fail(pf + ".fraction_of_peak", "expected a number in (0, 1], got " + f.dump());
          curve.push_back({n.get<int64_t>(), f.get<double>()});
        }
        std::sort(curve.begin(), curve.end(),
                  [](const auto& a, const auto& b) { return a.n < b.n; });
        for (size_t i = 1; i < curve.size(); ++i)
          if (curve[i].n == curve[i - 1].n)
            r.fail(df, fmt::format("n = {} appears twice", curve[i].n));
        (k == "gemm" ? out.gemm : out.conv)[dtype] = std::move(curve);
      }
    } else if (k == "gemm_rows" || k == "conv_rows") {
      if (!v.is_object()) r.fail(field, "expected an object of dtypes, got " + v.dump());
      for (const auto& [dtype, pts] : v.items()) {
        const std::string df = field + "." + dtype;
        if (!kDtypes.count(dtype)) r.fail(df, "unknown dtype (expected one of peak_tflops' keys)");
        if (!pts.is_array() || pts.empty())
          r.fail(df, "expected a non-empty array of {\"rows\", \"n\", \"fraction_of_peak\"}");
        std::vector<PlatformDescription::Efficiency::RowsPoint> list;
        for (size_t i = 0; i < pts.size(); ++i) {
          const std::string pf = fmt::format("{}[{}]", df, i);
          const json& pt = pts[i];
          if (!pt.is_object() || pt.size() != 3 || !pt.contains("rows") || !pt.contains("n") ||
              !pt.contains("fraction_of_peak"))
            r.fail(pf, "expected {\"rows\": m, \"n\": size, \"fraction_of_peak\": f}, got " +
                           pt.dump());
          for (const char* key : {"rows", "n"}) {
            const json& d = pt[key];
            if (!d.is_number_integer() || d.get<int64_t>() <= 0 || d.get<int64_t>() > 10000000)
              r.fail(pf + "." + key, "expected a positive integer, got " + d.dump());
          }
          const json& f = pt["fraction_of_peak"];
          if (!f.is_number() || !(f.get<double>() > 0) || f.get<double>() > 1)
            r.fail(pf + ".fraction_of_peak", "expected a number in (0, 1], got " + f.dump());
          list.push_back({pt["rows"].get<int64_t>(), pt["n"].get<int64_t>(), f.get<double>()});
        }
        sort_by_rows(list);
        for (size_t i = 1; i < list.size(); ++i)
          if (list[i].rows == list[i - 1].rows && list[i].n == list[i - 1].n)
            r.fail(df, fmt::format("rows = {}, n = {} appears twice", list[i].rows, list[i].n));
        (k == "gemm_rows" ? out.gemm_rows : out.conv_rows)[dtype] = std::move(list);
      }
    } else if (k == "gemm_tiles") {
      if (!v.is_object()) r.fail(field, "expected an object of dtypes, got " + v.dump());
      for (const auto& [dtype, tiles] : v.items()) {
        const std::string df = field + "." + dtype;
        if (!kDtypes.count(dtype)) r.fail(df, "unknown dtype (expected one of peak_tflops' keys)");
        if (!tiles.is_array() || tiles.empty())
          r.fail(df, "expected a non-empty array of [rows, cols] tiles");
        std::vector<PlatformDescription::Efficiency::Tile> list;
        for (size_t i = 0; i < tiles.size(); ++i) {
          const json& t = tiles[i];
          const bool ok = t.is_array() && t.size() == 2 && t[0].is_number_integer() &&
                          t[1].is_number_integer() && t[0].get<int64_t>() > 0 &&
                          t[1].get<int64_t>() > 0 && t[0].get<int64_t>() <= 4096 &&
                          t[1].get<int64_t>() <= 4096;
          if (!ok)
            r.fail(fmt::format("{}[{}]", df, i),
                   "expected [rows, cols], two integers in [1, 4096], got " + t.dump());
          list.push_back({t[0].get<int64_t>(), t[1].get<int64_t>()});
        }
        out.gemm_tiles[dtype] = std::move(list);
      }
    } else if (k == "op_ns_per_element") {
      if (!v.is_object()) r.fail(field, "expected an object of layer ops, got " + v.dump());
      for (const auto& [op, ns] : v.items()) {
        if (!ns.is_number() || !(ns.get<double>() > 0) || ns.get<double>() > 1e6)
          r.fail(field + "." + op, "expected nanoseconds in (0, 1e6], got " + ns.dump());
        out.op_ns_per_element[op] = ns.get<double>();
      }
    } else if (k == "cell_step_us") {
      if (!v.is_object()) r.fail(field, "expected an object of recurrent cells, got " + v.dump());
      for (const auto& [cell, us] : v.items()) {
        if (cell != "rnn" && cell != "lstm" && cell != "gru")
          r.fail(field + "." + cell, "unknown cell (expected rnn, lstm or gru)");
        out.cell_step_us[cell] = r.microseconds(us, field + "." + cell);
      }
    } else if (k == "optimizer_ns_per_param") {
      if (!v.is_object()) r.fail(field, "expected an object of dtypes, got " + v.dump());
      for (const auto& [dtype, opts] : v.items()) {
        const std::string df = field + "." + dtype;
        if (!kDtypes.count(dtype)) r.fail(df, "unknown dtype (expected one of peak_tflops' keys)");
        if (!opts.is_object() || opts.empty())
          r.fail(df, "expected an object of optimizers, got " + opts.dump());
        for (const auto& [opt, ns] : opts.items()) {
          if (!kOptimizers.count(opt))
            r.fail(df + "." + opt,
                   "unknown optimizer (expected sgd, momentum, adam, adamw or "
                   "rmsprop)");
          if (!ns.is_number() || !(ns.get<double>() > 0) || ns.get<double>() > 1e6)
            r.fail(df + "." + opt, "expected nanoseconds in (0, 1e6], got " + ns.dump());
          out.optimizer_ns_per_param[dtype][opt] = ns.get<double>();
        }
      }
    } else if (k == "layer_call_us") {
      if (!v.is_object()) r.fail(field, "expected an object of layer ops, got " + v.dump());
      for (const auto& [op, call] : v.items()) {
        const std::string of = field + "." + op;
        // The measured ops only: a time under another name (conv2d, linear) would be added to
        // every such layer on top of its own fixed costs.
        if (!kLayerCallOps.count(op))
          r.fail(of, "unknown op (expected batchnorm, maxpool, avgpool, relu or add)");
        if (!call.is_object() || call.size() != 3 || !call.contains("forward") ||
            !call.contains("backward") || !call.contains("elements"))
          r.fail(of, "expected {\"forward\": us, \"backward\": us, \"elements\": n}, got " +
                         call.dump());
        out.layer_call_us[op] = {r.microseconds(call["forward"], of + ".forward"),
                                 r.microseconds(call["backward"], of + ".backward"),
                                 r.positive(call["elements"], of + ".elements")};
      }
    } else if (k == "cell_ns_per_element") {
      if (!v.is_object()) r.fail(field, "expected an object of recurrent cells, got " + v.dump());
      for (const auto& [cell, ns] : v.items()) {
        if (cell != "rnn" && cell != "lstm" && cell != "gru")
          r.fail(field + "." + cell, "unknown cell (expected rnn, lstm or gru)");
        if (!ns.is_number() || !(ns.get<double>() > 0) || ns.get<double>() > 1e6)
          r.fail(field + "." + cell, "expected nanoseconds in (0, 1e6], got " + ns.dump());
        out.cell_ns_per_element[cell] = ns.get<double>();
      }
    } else if (k == "cell_step_table") {
      if (!v.is_object()) r.fail(field, "expected an object of recurrent cells, got " + v.dump());
      for (const auto& [cell, pts] : v.items()) {
        const std::string cf = field + "." + cell;
        if (cell != "rnn" && cell != "lstm" && cell != "gru")
          r.fail(cf, "unknown cell (expected rnn, lstm or gru)");
        if (!pts.is_array() || pts.empty())
          r.fail(cf, "expected a non-empty array of {\"hidden\", \"batch\", \"us\"}");
        std::vector<PlatformDescription::Efficiency::CellStepPoint> list;
        std::set<int64_t> hiddens, batches;
        for (size_t i = 0; i < pts.size(); ++i) {
          const std::string pf = fmt::format("{}[{}]", cf, i);
          const json& pt = pts[i];
          if (!pt.is_object() || pt.size() != 3 || !pt.contains("hidden") ||
              !pt.contains("batch") || !pt.contains("us"))
            r.fail(pf, "expected {\"hidden\": h, \"batch\": b, \"us\": time}, got " + pt.dump());
          for (const char* key : {"hidden", "batch"}) {
            const json& d = pt[key];
            if (!d.is_number_integer() || d.get<int64_t>() <= 0 || d.get<int64_t>() > 1000000)
              r.fail(pf + "." + key, "expected an integer in [1, 1000000], got " + d.dump());
          }
          list.push_back({pt["hidden"].get<int64_t>(), pt["batch"].get<int64_t>(),
                          r.microseconds(pt["us"], pf + ".us")});
          if (!(list.back().us > 0)) r.fail(pf + ".us", "expected a positive time");
          hiddens.insert(list.back().hidden), batches.insert(list.back().batch);
        }
        std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
          return a.hidden != b.hidden ? a.hidden < b.hidden : a.batch < b.batch;
        });
        for (size_t i = 1; i < list.size(); ++i)
          if (list[i].hidden == list[i - 1].hidden && list[i].batch == list[i - 1].batch)
            r.fail(cf, fmt::format("hidden = {}, batch = {} appears twice", list[i].hidden,
                                   list[i].batch));
        // Read between grid points: every hidden size at every batch size.
        if (list.size() != hiddens.size() * batches.size())
          r.fail(cf, fmt::format("expected every hidden size at every batch size ({} x {}), got {} "
                                 "points",
                                 hiddens.size(), batches.size(), list.size()));
        out.cell_step_table[cell] = std::move(list);
        // The layer's calls are counted once per phase only where its per-step operators
        // are measured; without them they would be counted on top of the table's time.
        if (!e.contains("cell_step_us") || !e["cell_step_us"].is_object() ||
            !e["cell_step_us"].contains(cell))
          r.fail(cf, "a cell's table needs its cell_step_us." + cell + " beside it");
      }
    } else if (k == "working_set") {
      if (!v.is_array() || v.empty())
        r.fail(field, "expected a non-empty array of {\"bytes\", \"gbps\"}, got " + v.dump());
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string pf = fmt::format("{}[{}]", field, i);
        const json& pt = v[i];
        if (!pt.is_object() || pt.size() != 2 || !pt.contains("bytes") || !pt.contains("gbps"))
          r.fail(pf, "expected {\"bytes\": size, \"gbps\": bandwidth}, got " + pt.dump());
        const double bytes = r.positive(pt["bytes"], pf + ".bytes"),
                     gbps = r.positive(pt["gbps"], pf + ".gbps");
        if (!out.working_set.empty() && !(bytes > out.working_set.back().bytes))
          r.fail(pf + ".bytes", "expected sizes in ascending order, got " + pt["bytes"].dump());
        out.working_set.push_back({bytes, gbps});
      }
    } else {
      r.fail(
          field,
          "unknown key (expected op_overhead_us, host_op_us, host_step_us, conv_call_us, "
          "memory_fraction, gemm, gemm_rows, conv, conv_rows, gemm_tiles, gemm_alignment, "
          "op_ns_per_element, cell_step_us, cell_ns_per_element, cell_step_table, layer_call_us, "
          "optimizer_ns_per_param or working_set)");
    }
  }
  return out;
}

}  // namespace

void sort_by_rows(std::vector<PlatformDescription::Efficiency::RowsPoint>& points) {
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    return a.rows != b.rows ? a.rows < b.rows : a.n < b.n;
  });
}

double equivalent_square_n(double m, double n, double k) {
  const double faces = m * k + k * n + m * n;
  return faces > 0 ? 3 * m * n * k / faces : 0;
}

namespace {

// Log-log interpolation in a curve sorted by n, clamped at its ends.
double interpolate(const std::vector<PlatformDescription::GemmPoint>& c, double n) {
  if (n <= c.front().n) return c.front().fraction_of_peak;
  if (n >= c.back().n) return c.back().fraction_of_peak;
  size_t i = 1;
  while (c[i].n < n) ++i;
  const auto &a = c[i - 1], &b = c[i];
  const double t = std::log(n / a.n) / std::log(double(b.n) / a.n);
  return std::exp(std::log(a.fraction_of_peak) +
                  t * (std::log(b.fraction_of_peak) - std::log(a.fraction_of_peak)));
}

// A row count of a rows table: its curve over n read at some n, and the largest n it has.
struct RowCurve {
  double rows = 0, fraction = 0, last_n = 0;
};

// Each row count's curve over n (points by rows, then n), read at n; ascending rows.
std::vector<RowCurve> rows_curves_at(
    const std::vector<PlatformDescription::Efficiency::RowsPoint>& pts, double n) {
  std::vector<RowCurve> at;
  for (size_t i = 0; i < pts.size();) {
    std::vector<PlatformDescription::GemmPoint> curve;
    size_t j = i;
    for (; j < pts.size() && pts[j].rows == pts[i].rows; ++j)
      curve.push_back({pts[j].n, pts[j].fraction_of_peak});
    at.push_back({double(pts[i].rows), interpolate(curve, n), double(curve.back().n)});
    i = j;
  }
  return at;
}

// f0 at x0 to f1 at x1, log-log, at x.
double log_between(double x, double x0, double f0, double x1, double f1) {
  if (!(x1 > x0)) return f0;
  const double t = std::log(x / x0) / std::log(x1 / x0);
  return std::exp(std::log(f0) + t * (std::log(f1) - std::log(f0)));
}

// rows_curves_at's figures at `rows`, log-log between the row counts around it, clamped at
// both ends.
double between_rows(const std::vector<RowCurve>& at, double rows) {
  if (rows <= at.front().rows) return at.front().fraction;
  if (rows >= at.back().rows) return at.back().fraction;
  size_t i = 1;
  while (rows > at[i].rows) ++i;
  return log_between(rows, at[i - 1].rows, at[i - 1].fraction, at[i].rows, at[i].fraction);
}

}  // namespace

double PlatformDescription::working_set_gbps(double bytes) const {
  if (!efficiency || efficiency->working_set.empty() || !(bytes > 0)) return 0;
  const auto& c = efficiency->working_set;
  if (bytes <= c.front().bytes) return c.front().gbps;
  if (bytes >= c.back().bytes) return c.back().gbps;
  size_t i = 1;
  while (c[i].bytes < bytes) ++i;
  const auto &a = c[i - 1], &b = c[i];
  const double t = std::log(bytes / a.bytes) / std::log(b.bytes / a.bytes);
  return std::exp(std::log(a.gbps) + t * (std::log(b.gbps) - std::log(a.gbps)));
}

double PlatformDescription::cell_step_table_us(const std::string& cell, double hidden,
                                               double batch) const {
  if (!efficiency || !(hidden > 0) || !(batch > 0)) return 0;
  const auto it = efficiency->cell_step_table.find(cell);
  if (it == efficiency->cell_step_table.end() || it->second.empty()) return 0;
  const auto& pts = it->second;  // a full grid, by hidden then batch
  std::vector<double> hs, bs;
  for (const auto& pt : pts) {
    if (hs.empty() || hs.back() != double(pt.hidden)) hs.push_back(double(pt.hidden));
    if (hs.size() == 1) bs.push_back(double(pt.batch));
  }
  if (hidden < hs.front() || hidden > hs.back() || batch < bs.front() || batch > bs.back())
    return 0;
  // The grid points below and above each size (the same point where the grid has one size or
  // the size is a grid point), and where between them on a log scale.
  const auto bracket = [](const std::vector<double>& grid, double x) {
    size_t i = 0;
    while (i + 2 < grid.size() && grid[i + 1] < x) ++i;
    const size_t j = std::min(i + 1, grid.size() - 1);
    const double t = j == i ? 0 : std::log(x / grid[i]) / std::log(grid[j] / grid[i]);
    return std::tuple<size_t, size_t, double>{i, j, std::clamp(t, 0.0, 1.0)};
  };
  const auto [h0, h1, th] = bracket(hs, hidden);
  const auto [b0, b1, tb] = bracket(bs, batch);
  const auto at = [&](size_t h, size_t b) { return std::log(pts[h * bs.size() + b].us); };
  const double low = at(h0, b0) + tb * (at(h0, b1) - at(h0, b0)),
               high = at(h1, b0) + tb * (at(h1, b1) - at(h1, b0));
  return std::exp(low + th * (high - low));
}

double PlatformDescription::gemm_fraction(const std::string& dtype, double n) const {
  if (!efficiency || !(n > 0)) return 1;
  auto it = efficiency->gemm.find(dtype);
  if (it == efficiency->gemm.end() || it->second.empty()) return 1;
  return interpolate(it->second, n);
}

double PlatformDescription::gemm_shape_fraction(const std::string& dtype, double m, double n,
                                                double k) const {
  const auto square = [&] { return gemm_fraction(dtype, equivalent_square_n(m, n, k)); };
  if (!efficiency || !(m > 0) || !(n > 0) || !(k > 0)) return square();
  const auto it = efficiency->gemm_rows.find(dtype);
  if (it == efficiency->gemm_rows.end() || it->second.empty()) return square();
  double d[3] = {m, n, k};
  std::sort(d, d + 3);
  const double s = d[0], L = 2 * d[1] * d[2] / (d[1] + d[2]);
  const auto& pts = it->second;
  const auto at = rows_curves_at(pts, L);
  double f = between_rows(at, s);
  if (s > at.back().rows) {
    // Above the largest row count: toward the square product of size L (L >= s > rows), or
    // that row count's figure where the dtype has no square curve to head for.
    const auto sq = efficiency->gemm.find(dtype);
    if (sq != efficiency->gemm.end() && !sq->second.empty())
      f = log_between(s, at.back().rows, at.back().fraction, L, gemm_fraction(dtype, L));
  }
  // A product smaller than every measured n: the rows curves only hold their smallest point
  // there, so the square curve's small end, where lower, stands for it.
  int64_t smallest_n = pts.front().n;
  for (const auto& pt : pts) smallest_n = std::min(smallest_n, pt.n);
  if (L < double(smallest_n)) f = std::min(f, square());
  return f;
}

double PlatformDescription::wave_utilization(const std::string& dtype, double m, double n, double k,
                                             double count) const {
  if (!efficiency || cores <= 0 || !(m > 0) || !(n > 0) || !(count > 0)) return 1;
  const auto it = efficiency->gemm_tiles.find(dtype);
  if (it == efficiency->gemm_tiles.end() || it->second.empty()) return 1;
  double best = 0;
  for (const auto& t : it->second)
    for (double s = 1; s <= 16 && (s == 1 || k / s >= kMinSplitK); s *= 2) {
      const double ctas =
          std::ceil(m / double(t.rows)) * std::ceil(n / double(t.cols)) * std::ceil(count) * s;
      const double waves = std::ceil(ctas / double(cores));
      best = std::max(best, count * m * n * s / (waves * cores * double(t.rows) * double(t.cols)));
    }
  return std::min(best, 1.0);
}

double PlatformDescription::conv_fraction(const std::string& dtype, double n) const {
  if (!efficiency || !(n > 0)) return 1;
  auto it = efficiency->conv.find(dtype);
  if (it == efficiency->conv.end() || it->second.empty()) return gemm_fraction(dtype, n);
  return interpolate(it->second, n);
}

double PlatformDescription::conv_shape_fraction(const std::string& dtype, double m, double n,
                                                double k) const {
  const auto curve = [&] { return conv_fraction(dtype, equivalent_square_n(m, n, k)); };
  if (!efficiency || !(m > 0) || !(n > 0) || !(k > 0)) return curve();
  const auto it = efficiency->conv_rows.find(dtype);
  if (it == efficiency->conv_rows.end() || it->second.empty()) return curve();
  const double c = std::sqrt(n * k / 9);
  const auto at = rows_curves_at(it->second, c);
  const double f = between_rows(at, m);
  // Past the table's largest row count, or past the channels measured at the row counts
  // around m: shapes the grid left out for their size, which thread well; the curve stands
  // for them where it is higher than the table's edge.
  bool beyond = m > at.back().rows;
  for (size_t i = 0; i < at.size(); ++i) {
    // The row counts m lies between (the first alone below it).
    const bool lower = at[i].rows <= m && (i + 1 == at.size() || at[i + 1].rows > m);
    const bool upper = at[i].rows >= m && (i == 0 || at[i - 1].rows < m);
    if ((lower || upper) && c > at[i].last_n) beyond = true;
  }
  return beyond ? std::max(f, curve()) : f;
}

double PlatformDescription::alignment_fraction(const std::string& dtype, int64_t elem_bits,
                                               std::initializer_list<int64_t> dims) const {
  if (!efficiency || elem_bits <= 0) return 1;
  const auto it = efficiency->gemm_alignment.find(dtype);
  if (it == efficiency->gemm_alignment.end() || it->second.empty()) return 1;
  int64_t align_bits = 128;
  for (const int64_t d : dims) {
    // A product this thin runs on other kernels (GEMV-like), not the tiled ones measured.
    if (d < kThinGemmDim) continue;
    const int64_t bits = d * elem_bits;
    align_bits = std::min(align_bits, bits & -bits);  // the largest power of two dividing it
  }
  if (align_bits >= 128) return 1;
  // The next smaller alignment stated (a kernel for 8-byte alignment serves 8 and 16), or,
  // below every stated one (a 4-bit format's half byte), the smallest stated.
  for (auto f = it->second.rbegin(); f != it->second.rend(); ++f)
    if (8 * f->first <= align_bits) return f->second;
  return it->second.begin()->second;
}

std::optional<double> PlatformDescription::peak_flops(const std::string& dtype) const {
  auto it = peak_tflops.find(dtype);
  if (it == peak_tflops.end()) return std::nullopt;
  return it->second * 1e12;
}

std::optional<double> PlatformDescription::ridge(const std::string& dtype) const {
  auto peak = peak_flops(dtype);
  if (!peak || bandwidth() <= 0) return std::nullopt;
  return *peak / bandwidth();
}

std::optional<double> PlatformDescription::attainable(const std::string& dtype,
                                                      double intensity) const {
  auto peak = peak_flops(dtype);
  if (!peak) return std::nullopt;
  return std::min(*peak, bandwidth() * intensity);
}

PlatformDescription parse_platform(const json& j, const std::string& origin) {
  if (!j.is_object()) throw UsageError(origin + ": expected a JSON object");
  Reader r{j, origin};
  const json* version = r.get("schema_version", true);
  if (!version->is_number_integer() || version->get<int>() != kPlatformSchemaVersion)
    r.fail("schema_version",
           fmt::format("expected {}, got {}", kPlatformSchemaVersion, version->dump()));
  PlatformDescription p;
  p.extra = json::object();
  p.name = r.str("name", true);
  if (p.name.empty() ||
      p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos)
    r.fail("name", "use lower-case letters, digits, '.', '_' and '-', got '" + p.name + "'");
  p.description = r.str("description", false);
  p.kind = r.str("kind", true);
  if (!kKinds.count(p.kind))
    r.fail("kind", "expected cpu, gpu, tpu or accelerator, got '" + p.kind + "'");
  p.source = r.str("source", true);
  if (p.source.empty()) r.fail("source", "say where the numbers come from");
  if (const json* c = r.get("cores", false)) {
    if (!c->is_number_integer() || c->get<int64_t>() <= 0 || c->get<int64_t>() > 100000000)
      r.fail("cores", "expected a positive integer, got " + c->dump());
    p.cores = c->get<int>();
  }
  p.memory_gb = r.positive(*r.get("memory_gb", true), "memory_gb");
  p.memory_bandwidth_gbps =
      r.positive(*r.get("memory_bandwidth_gbps", true), "memory_bandwidth_gbps");
  p.peak_tflops = r.table("peak_tflops", kDtypes, true);
  p.cache_bandwidth_gbps = r.table("cache_bandwidth_gbps", kCacheLevels, false);
  if (const json* ra = r.get("runs_as", false)) {
    if (!ra->is_object()) r.fail("runs_as", "expected an object of format: peak key");
    for (const auto& [k, v] : ra->items()) {
      if (!v.is_string() || !p.peak_tflops.count(v.get<std::string>()))
        r.fail("runs_as." + k, "expected one of peak_tflops' keys, got " + v.dump());
      p.runs_as[k] = v.get<std::string>();
    }
  }
  if (const json* s = r.get("systolic_array", false)) {
    if (!s->is_object()) r.fail("systolic_array", "expected an object");
    Reader sr{*s, origin};
    PlatformDescription::Systolic sa;
    for (const char* k : {"rows", "cols"}) {
      const json* v = sr.get(k, false);
      if (!v || !v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > 65536)
        r.fail(std::string("systolic_array.") + k, "expected an integer from 1 to 65536");
      (std::string(k) == "rows" ? sa.rows : sa.cols) = v->get<int>();
    }
    sa.dataflow = sr.str("dataflow", false);
    if (sa.dataflow.empty()) sa.dataflow = "weight-stationary";
    if (sa.dataflow != "weight-stationary" && sa.dataflow != "output-stationary")
      r.fail("systolic_array.dataflow",
             "expected weight-stationary or output-stationary, got '" + sa.dataflow + "'");
    p.systolic_array = sa;
  }
  if (const json* e = r.get("efficiency", false)) p.efficiency = parse_efficiency(*e, r);
  for (const auto& [k, v] : j.items()) {
    if (kKnownKeys.count(k)) continue;
    if (!kMeasuredKeys.count(k))
      r.fail(k,
             "unknown key (a typo? known: name, description, kind, source, cores, memory_gb, "
             "memory_bandwidth_gbps, peak_tflops, runs_as, cache_bandwidth_gbps, systolic_array, "
             "efficiency, notes)");
    p.extra[k] = v;
  }
  return p;
}

PlatformDescription load_platform_file(const std::string& path) {
  if (is_directory(path)) throw UsageError(path + ": a directory, not a platform description file");
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot open platform description");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    // nlohmann's message carries the byte position; keep it to one line. A number past
    // double's range (1e400) is an out_of_range error of the parser, not a parse_error.
    std::string what = e.what();
    throw UsageError(path + ": not valid JSON: " + first_line(what));
  }
  return parse_platform(j, path);
}

json to_json(const PlatformDescription& p) {
  json j = p.extra.is_object() ? p.extra : json::object();
  j["schema_version"] = kPlatformSchemaVersion;
  j["name"] = p.name;
  if (!p.description.empty()) j["description"] = p.description;
  j["kind"] = p.kind;
  j["source"] = p.source;
  if (p.cores > 0) j["cores"] = p.cores;
  j["memory_gb"] = p.memory_gb;
  j["memory_bandwidth_gbps"] = p.memory_bandwidth_gbps;
  j["peak_tflops"] = p.peak_tflops;
  if (!p.runs_as.empty()) j["runs_as"] = p.runs_as;
  if (!p.cache_bandwidth_gbps.empty()) j["cache_bandwidth_gbps"] = p.cache_bandwidth_gbps;
  if (p.systolic_array)
    j["systolic_array"] = {{"rows", p.systolic_array->rows},
                           {"cols", p.systolic_array->cols},
                           {"dataflow", p.systolic_array->dataflow}};
  if (p.efficiency) {
    json e = {{"op_overhead_us", p.efficiency->op_overhead_us}};
    if (p.efficiency->memory_fraction != 1) e["memory_fraction"] = p.efficiency->memory_fraction;
    if (p.efficiency->conv_call_us > 0) e["conv_call_us"] = p.efficiency->conv_call_us;
    if (p.efficiency->host_op_us > 0) e["host_op_us"] = p.efficiency->host_op_us;
    if (p.efficiency->host_step_us > 0) e["host_step_us"] = p.efficiency->host_step_us;
    for (const auto& [dtype, by] : p.efficiency->gemm_alignment)
      for (const auto& [bytes, f] : by) e["gemm_alignment"][dtype][std::to_string(bytes)] = f;
    for (const auto& [key, curves] :
         {std::pair{"gemm", &p.efficiency->gemm}, std::pair{"conv", &p.efficiency->conv}})
      for (const auto& [dtype, curve] : *curves) {
        json pts = json::array();
        for (const auto& pt : curve)
          pts.push_back({{"n", pt.n}, {"fraction_of_peak", pt.fraction_of_peak}});
        e[key][dtype] = pts;
      }
    for (const auto& [key, tables] : {std::pair{"gemm_rows", &p.efficiency->gemm_rows},
                                      std::pair{"conv_rows", &p.efficiency->conv_rows}})
      for (const auto& [dtype, pts] : *tables)
        for (const auto& pt : pts)
          e[key][dtype].push_back(
              {{"rows", pt.rows}, {"n", pt.n}, {"fraction_of_peak", pt.fraction_of_peak}});
    if (!p.efficiency->op_ns_per_element.empty())
      e["op_ns_per_element"] = p.efficiency->op_ns_per_element;
    if (!p.efficiency->cell_step_us.empty()) e["cell_step_us"] = p.efficiency->cell_step_us;
    if (!p.efficiency->optimizer_ns_per_param.empty())
      e["optimizer_ns_per_param"] = p.efficiency->optimizer_ns_per_param;
    if (!p.efficiency->cell_ns_per_element.empty())
      e["cell_ns_per_element"] = p.efficiency->cell_ns_per_element;
    for (const auto& [op, call] : p.efficiency->layer_call_us)
      e["layer_call_us"][op] = {
          {"forward", call.forward}, {"backward", call.backward}, {"elements", call.elements}};
    for (const auto& pt : p.efficiency->working_set)
      e["working_set"].push_back({{"bytes", pt.bytes}, {"gbps", pt.gbps}});
    for (const auto& [cell, pts] : p.efficiency->cell_step_table)
      for (const auto& pt : pts)
        e["cell_step_table"][cell].push_back(
            {{"hidden", pt.hidden}, {"batch", pt.batch}, {"us", pt.us}});
    for (const auto& [dtype, tiles] : p.efficiency->gemm_tiles)
      for (const auto& t : tiles) e["gemm_tiles"][dtype].push_back({t.rows, t.cols});
    j["efficiency"] = e;
  }
  return j;
}

std::optional<RooflinePlacement> place_on_roofline(const PlatformDescription& p,
                                                   const std::string& dtype, double intensity,
                                                   double achieved_flops) {
  auto peak = p.peak_flops(dtype);
  auto ridge = p.ridge(dtype);
  if (!peak || !ridge) return std::nullopt;
  RooflinePlacement r;
  r.platform = p.name;
  r.dtype = dtype;
  r.peak_flops = *peak;
  r.bandwidth = p.bandwidth();
  r.ridge = *ridge;
  r.intensity = intensity;
  r.attainable = *p.attainable(dtype, intensity);
  r.achieved = achieved_flops;
  r.memory_bound = intensity < *ridge;
  return r;
}

}  // namespace tb
