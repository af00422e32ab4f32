#include "runner/characterize.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <torch/version.h>

#include <cstdlib>
#include <ctime>
#include <fstream>

#include "base/files.h"
#include "platform/blas.h"
#include "platform/host.h"
#include "platform/microarchitecture.h"
#include "runner/measure.h"

namespace tb {
namespace {

// Bump when the measurement method changes, so old caches are re-measured.
// 2: the description gains `efficiency` (per-operator overhead, GEMM curve down to n = 16).
// 3: `efficiency.conv`, a convolution curve (forward + backward, 8 to 256 channels), and
//    `efficiency.op_ns_per_element` for elementwise layers.
// 4: theoretical peaks per microarchitecture at the maximum clock, marked verified or not.
// 5: the fixed time of a convolution call (conv_call_us), measured on the run's threads.
// 6: a recurrent cell's time per time step (cell_step_us); softmax_xent and depthwise
//    convolutions (gconv2d) per element; curve points within twice the call floor left out.
// 7: an optimizer step's time per parameter, per optimizer and dtype (optimizer_ns_per_param).
// 8: a linear layer's GEMMs at batch rows (efficiency.gemm_rows).
// 9: a recurrent cell's elementwise time per gate element (cell_ns_per_element), the whole
//    layer per time step on a hidden x batch grid (cell_step_table); the working-set sweep's
//    bandwidths in the efficiency (working_set).
// 10: an elementwise layer's fixed time per call on the run's threads (layer_call_us).
// 11: convolutions on the run's threads by output rows and channels (conv_rows).
constexpr int kMethodVersion = 11;

// Runs a measurement on one thread (intra-op and BLAS), then restores the thread counts.
// The convolution and elementwise rates are one core's: on a small machine, the threading
// of small operators costs more than it saves, and that cost is not what these measure.
template <typename F>
auto one_core(F&& f) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  set_blas_threads(1);
  auto r = f();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  return r;
}

// A measurement's trials, with `point` (what was measured: its size, shape, ...) beside them.
nlohmann::json trials_json(const Trials& t, nlohmann::json point = nlohmann::json::object()) {
  point.update({{"trials", t.values}, {"best", t.best()}, {"median", t.median()}});
  return point;
}

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}

}  // namespace

nlohmann::json host_fingerprint() {
  const HostInfo h = host_info();
  const BlasInfo b = detect_blas();
  nlohmann::json caches = nlohmann::json::array();
  for (const auto& c : h.caches)
    caches.push_back(fmt::format("L{} {} {}x{}", c.level, c.type, c.instances, c.size_bytes));
  return {{"cpu_model", h.cpu_model},
          {"logical_cpus", h.logical_cpus},
          {"physical_cores", h.physical_cores},
          {"sockets", h.sockets},
          {"memory_gib", std::llround(double(h.mem_total) / (1 << 30))},
          {"simd", h.simd},
          {"caches", caches},
          {"libtorch", TORCH_VERSION},
          {"blas", b.label() + " " + b.version},
          {"method_version", kMethodVersion}};
}

PlatformDescription characterize_host(const CharacterizeOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const HostInfo h = host_info();
  const BlasInfo blas = detect_blas();
  PlatformDescription p;
  p.name = "host-" + h.hostname;
  for (auto& ch : p.name) ch = std::tolower(static_cast<unsigned char>(ch));
  p.description = fmt::format("{}: {} ({} cores, {} threads)", h.hostname, h.cpu_model,
                              h.physical_cores, h.logical_cpus);
  p.kind = "cpu";
  p.cores = h.physical_cores;
  p.memory_gb = double(h.mem_total) / 1e9;
  p.source = fmt::format(
      "measured by trainbench {} on {}: GEMM and convolutions via LibTorch {}, STREAM triad, "
      "operator overhead",
      TB_VERSION, utc_now_iso(), TORCH_VERSION);
  nlohmann::json measurements;
  // The same GEMM timed at the start, between the measurements and at the end: on a shared VM
  // the machine can run at three quarters of its speed for a minute (a description measured
  // so put every GEMM 25% slower and predicted a store of runs 9% too slow on median, against
  // 3% from the next one), and each measurement alone cannot see it.
  std::vector<std::pair<std::string, double>> steady;
  const auto checkpoint = [&](const std::string& at) {
    if (o.steadiness) steady.emplace_back(at, gemm_rate_now(512, 0.3));
  };
  checkpoint("start");

  // Measured first: the GEMM curve takes this floor out of every call.
  std::optional<OverheadMeasurement> overhead;
  if (o.overhead) {
    say("per-operator overhead");
    overhead = measure_overhead(o.trials, o.trial_s);
    measurements["overhead"] = {{"unit", "us"},
                                {"chain", overhead->chain},
                                {"kernel", "y = y * w + w on 8 floats, then sum().backward()"},
                                {"mm_call", trials_json(overhead->mm_call_us)},
                                {"forward", trials_json(overhead->forward_us)},
                                {"backward", trials_json(overhead->backward_us)}};
  }
  PlatformDescription::Efficiency efficiency;
  if (overhead) {
    // A convolution's fixed time is far above a generic operator's (oneDNN's primitive
    // lookup, reorders, starting its threads): measured apart, on the run's threads, and
    // added by the simulator per convolution phase beyond op_overhead_us.
    say("convolution call floor");
    const Trials floor = measure_conv_floor("fp32", o.trials, o.trial_s);
    measurements["conv_call_floor"] = {
        {"unit", "us"},
        {"kernel", "3x3 conv2d, batch 16, 8 channels, 2x2, fp32: forward + backward, all threads"},
        {"trials", trials_json(floor)}};
    efficiency.conv_call_us = std::max(0.0, floor.median() / 3 - overhead->op_overhead_us());
  }

  for (const auto& dtype : o.dtypes) {
    say("GEMM " + dtype);
    const GemmMeasurement g = measure_gemm(dtype, o.gemm_sizes, o.trials, o.trial_s);
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& s : g.sizes) sizes.push_back(trials_json(s.gflops, {{"n", s.n}}));
    measurements["gemm"][dtype] = {
        {"unit", "GFLOP/s"}, {"sizes", sizes}, {"best_n", g.best_n}, {"best", g.best_gflops}};
    p.peak_tflops[dtype] = g.best_gflops / 1000;
    if (overhead) {
      for (const auto& [n, f] : gemm_fractions(g, g.best_gflops, overhead->mm_call_us.median()))
        efficiency.gemm[dtype].push_back({n, f});
      if (!o.gemm_rows.empty() && !o.gemm_rows_sizes.empty()) {
        say("GEMM " + dtype + " at batch rows");
        const auto rows =
            measure_rows_gemm(dtype, o.gemm_rows, o.gemm_rows_sizes, o.trials, o.trial_s);
        nlohmann::json points = nlohmann::json::array();
        for (const auto& r : rows)
          points.push_back(trials_json(r.gflops, {{"rows", r.rows}, {"n", r.n}}));
        measurements["gemm_rows"][dtype] = {
            {"unit", "GFLOP/s"},
            {"kernel",
             "a linear layer's x W^T, dY W and dY^T x: rows x n by an n x n weight, torch::mm_out"},
            {"points", points}};
        for (const auto& r :
             rows_gemm_fractions(rows, g.best_gflops, overhead->mm_call_us.median()))
          efficiency.gemm_rows[dtype].push_back({r.rows, r.n, r.fraction});
        // By rows, then n, as a parsed description holds them (gemm_shape_fraction reads so).
        sort_by_rows(efficiency.gemm_rows[dtype]);
      }
      say("convolution " + dtype);
      const ConvMeasurement cm = one_core([&] {
        return measure_conv(dtype, {8, 16, 32, 64, 128, 256}, o.trials, o.trial_s);
      });
      nlohmann::json shapes = nlohmann::json::array();
      for (const auto& s : cm.shapes)
        shapes.push_back(trials_json(s.gflops, {{"channels", s.channels}, {"n", s.n}}));
      measurements["conv"][dtype] = {
          {"unit", "GFLOP/s"},
          {"kernel", "3x3 conv2d, stride 1, pad 1, batch 16, 16x16, C = K; forward + backward"},
          {"shapes", shapes}};
      // The simulator adds each convolution phase's fixed time (op_overhead_us +
      // conv_call_us) itself. One core's rate against one core's share of the peak: a run on
      // t cores gets t shares.
      const double core_peak = g.best_gflops / std::max(1, p.cores);
      for (const auto& [n, f] : conv_fractions(
               cm, core_peak, 3 * (overhead->op_overhead_us() + efficiency.conv_call_us)))
        efficiency.conv[dtype].push_back({n, f});
      if (!o.conv_grid_sides.empty() && !o.conv_grid_channels.empty()) {
        // Half the curves' window per shape: two dozen shapes, the largest still ~15 calls.
        say("convolution " + dtype + " on the run's threads");
        const auto grid = measure_conv_grid(dtype, o.conv_grid_sides, o.conv_grid_channels,
                                            o.trials, o.trial_s / 2);
        nlohmann::json points = nlohmann::json::array();
        for (const auto& pt : grid)
          points.push_back(trials_json(pt.gflops, {{"rows", pt.rows}, {"channels", pt.channels}}));
        measurements["conv_rows"][dtype] = {
            {"unit", "GFLOP/s"},
            {"kernel",
             "3x3 conv2d, stride 1, pad 1, batch 8, rows = 8 x side x side, C = K; forward + "
             "backward, all threads"},
            {"points", points}};
        // Against the whole machine's peak, the fixed time taken out as for the curve.
        for (const auto& r : conv_grid_fractions(
                 grid, g.best_gflops, 3 * (overhead->op_overhead_us() + efficiency.conv_call_us)))
          efficiency.conv_rows[dtype].push_back({r.rows, r.n, r.fraction});
        sort_by_rows(efficiency.conv_rows[dtype]);
        if (efficiency.conv_rows[dtype].empty()) efficiency.conv_rows.erase(dtype);
      }
    }
  }
  checkpoint("after the GEMM and convolution curves");
  if (overhead) {
    say("elementwise layers");
    nlohmann::json ops = {{"unit", "ns per element"},
                          {"kernel", "forward + backward, float32 32x16x16x16"}};
    for (const auto& [op, t] :
         one_core([&] { return measure_elementwise_ops(o.trials, o.trial_s); })) {
      ops[op] = trials_json(t);
      efficiency.op_ns_per_element[op] = t.median();
    }
    measurements["elementwise"] = ops;
    say("elementwise layer calls");
    nlohmann::json calls = {
        {"unit", "us per layer call"},
        {"kernel",
         "chains of 2 and 10 layers from float32 16x8x4x4 (the pools' extra layers on 16x8x1x1), "
         "forward and backward timed apart, the difference over 8 layers, on the run's threads"}};
    for (const auto& [op, t] : measure_layer_calls(o.trials, o.trial_s)) {
      calls[op] = {{"forward", trials_json(t.forward)}, {"backward", trials_json(t.backward)}};
      calls[op]["elements"] = t.elements;
      efficiency.layer_call_us[op] = {t.forward.median(), t.backward.median(), t.elements};
    }
    measurements["layer_calls"] = calls;
    // On the run's threads, as conv_call_us: what a step's operators cost is what it costs
    // there.
    say("recurrent cell steps");
    nlohmann::json cells = {
        {"unit", "us per time step"},
        {"kernel",
         "LibTorch's nn::RNN/LSTM/GRU, width 8, batch 1: forward + backward at lengths "
         "40 and 8, the difference over 32 steps"}};
    for (const auto& [cell, t] : measure_cell_steps(o.trials, o.trial_s)) {
      cells[cell] = trials_json(t);
      efficiency.cell_step_us[cell] = t.median();
    }
    measurements["cell_steps"] = cells;
    say("recurrent cells' elementwise work");
    nlohmann::json gates = {
        {"unit", "ns per gate element and time step"},
        {"kernel",
         "the elementwise operators of LibTorch 1.13's CPU RNN, LSTM and GRU cells after their "
         "GEMMs, forward + backward, batch 32: hidden 192 less hidden 64, per added element"}};
    for (const auto& [cell, t] : measure_cell_elementwise(o.trials, o.trial_s)) {
      gates[cell] = trials_json(t);
      if (t.median() > 0) efficiency.cell_ns_per_element[cell] = t.median();
    }
    measurements["cell_elementwise"] = gates;
    say("recurrent layers per time step");
    nlohmann::json table = {
        {"unit", "us per time step"},
        {"kernel",
         "LibTorch's nn::RNN/LSTM/GRU, input width = hidden, fp32, input gradient taken: forward "
         "+ backward at lengths 4 and 16, the difference over 12 steps"},
        {"points", nlohmann::json::array()}};
    for (const auto& [cell, pts] : measure_cell_step_table(o.trials, o.trial_s))
      for (const auto& pt : pts) {
        table["points"].push_back(
            trials_json(pt.us, {{"cell", cell}, {"hidden", pt.hidden}, {"batch", pt.batch}}));
        // A point the two lengths could not tell apart leaves the grid incomplete: no table.
        if (pt.us.median() > 0)
          efficiency.cell_step_table[cell].push_back({pt.hidden, pt.batch, pt.us.median()});
      }
    for (auto it = efficiency.cell_step_table.begin(); it != efficiency.cell_step_table.end();)
      it = it->second.size() == std::size(kCellTableHidden) * std::size(kCellTableBatch)
               ? std::next(it)
               : efficiency.cell_step_table.erase(it);
    measurements["cell_step_table"] = table;
    // On the run's threads too: a step's update runs there.
    for (const auto& dtype : o.dtypes) {
      say("optimizer steps " + dtype);
      nlohmann::json steps = {
          {"unit", "ns per parameter"},
          {"kernel", "LibTorch's optimizer step (make_optimizer) over 4 x 512 x 1024 " + dtype +
                         " parameters"}};
      for (const auto& [opt, t] : measure_optimizer_steps(dtype, o.trials, o.trial_s)) {
        steps[opt] = trials_json(t);
        efficiency.optimizer_ns_per_param[dtype][opt] = t.median();
      }
      measurements["optimizer_steps"][dtype] = steps;
    }
    efficiency.op_overhead_us = overhead->op_overhead_us();
    p.efficiency = efficiency;
  }

  checkpoint("after the operator measurements");
  // STREAM wants each array at least 4x the last-level cache; stay within a third of
  // the available memory for the three arrays together.
  const int64_t llc = last_level_cache_bytes(h);
  int64_t elements = std::max<int64_t>(4 * llc, 64 << 20) / 8;
  const int64_t cap = available_memory_bytes() / 3 / 3 / 8;
  bool capped = elements > cap;
  elements = std::min(elements, cap);
  if (o.stream_elements > 0) elements = o.stream_elements, capped = elements * 8 < 4 * llc;
  say(fmt::format("STREAM, 3 arrays of {} MiB", elements * 8 >> 20));
  const StreamMeasurement s = measure_stream(elements, o.trials);
  measurements["stream"] = {{"unit", "GB/s"},
                            {"array_bytes", elements * 8},
                            {"last_level_cache_bytes", llc},
                            {"arrays_at_least_4x_llc", !capped},
                            {"threads", at::get_num_threads()},
                            {"copy", trials_json(s.copy)},
                            {"scale", trials_json(s.scale)},
                            {"add", trials_json(s.add)},
                            {"triad", trials_json(s.triad)},
                            {"validated", s.validated},
                            {"validation", s.validation}};
  p.memory_bandwidth_gbps = s.triad.best();

  if (o.sweep) {
    say("working-set sweep");
    const int64_t top = std::max<int64_t>(2 * llc, 64 << 20);
    const auto points = measure_working_sets(16 << 10, std::min(top, cap * 8), 3, 0.04);
    nlohmann::json sweep = nlohmann::json::array();
    for (const auto& pt : points) sweep.push_back(trials_json(pt.gbps, {{"bytes", pt.bytes}}));
    measurements["working_set"] = {
        {"unit", "GB/s"}, {"kernel", "x = 0.5 x + 0.5, 16 B/element"}, {"points", sweep}};
    for (const auto& [level, gbps] : cache_bandwidths(h, points))
      p.cache_bandwidth_gbps[level] = gbps;
    // Where caches end, for the simulator's optimizer rate (PlatformDescription::Efficiency).
    if (p.efficiency)
      for (const auto& pt : points)
        if (pt.gbps.median() > 0 && (p.efficiency->working_set.empty() ||
                                     double(pt.bytes) > p.efficiency->working_set.back().bytes))
          p.efficiency->working_set.push_back({double(pt.bytes), pt.gbps.median()});
  }

  checkpoint("end");
  if (!steady.empty()) {
    nlohmann::json points = nlohmann::json::array();
    double lo = steady[0].second, hi = lo;
    for (const auto& [at, gflops] : steady) {
      points.push_back({{"at", at}, {"gflops", gflops}});
      lo = std::min(lo, gflops), hi = std::max(hi, gflops);
    }
    const double spread = lo > 0 ? hi / lo : 0;
    measurements["steadiness"] = {
        {"unit", "GFLOP/s"},
        {"kernel", "fp32 512 x 512 GEMM, the best of three 0.1 s windows, the run's threads"},
        {"points", points},
        {"max_over_min", spread}};
    if (!(spread <= kSteadinessLimit)) {
      const std::string w = fmt::format(
          "the machine's speed changed during the measurement: the same GEMM ran at {:.0f} to "
          "{:.0f} GFLOP/s (max/min {:.2f}, limit {:.2f}); measure again (--refresh) when it is "
          "quiet",
          lo, hi, spread, kSteadinessLimit);
      measurements["steadiness"]["warning"] = w;
      say("WARNING: " + w);
    }
  }

  nlohmann::json spec_peaks = nlohmann::json::object(), formulas = nlohmann::json::object(),
                 verified = nlohmann::json::object(), caveats = nlohmann::json::object();
  for (const auto& t : theoretical_peaks(h, o.fma_units)) {
    spec_peaks[t.dtype] = t.flops / 1e12;
    formulas[t.dtype] = t.formula;
    verified[t.dtype] = t.verified;
    if (!t.caveat.empty()) caveats[t.dtype] = t.caveat;
  }
  const auto arch = find_microarchitecture(h.vendor, h.cpu_family, h.cpu_model_number);
  nlohmann::json caches = nlohmann::json::array();
  for (const auto& c : h.caches)
    caches.push_back({{"level", c.level},
                      {"type", c.type},
                      {"size_bytes", c.size_bytes},
                      {"instances", c.instances}});
  p.extra = {{"kind_of_document", "trainbench.platform"},
             {"measured_at", utc_now_iso()},
             {"spec_peak_tflops", spec_peaks},
             {"spec_peak_formula", formulas},
             {"spec_peak_verified", verified},
             {"spec_peak_caveat", caveats},
             {"machine",
              {{"hostname", h.hostname},
               {"cpu_model", h.cpu_model},
               {"sockets", h.sockets},
               {"physical_cores", h.physical_cores},
               {"logical_cpus", h.logical_cpus},
               {"mhz", h.mhz},
               {"mhz_source", h.mhz_source},
               {"max_mhz", h.max_mhz > 0 ? nlohmann::json(h.max_mhz) : nlohmann::json()},
               {"vendor", h.vendor},
               {"cpu_family", h.cpu_family},
               {"cpu_model_number", h.cpu_model_number},
               {"microarchitecture", arch ? nlohmann::json(arch->name) : nlohmann::json()},
               {"virtualized", h.virtualized},
               {"caches", caches},
               {"memory_total_bytes", h.mem_total},
               {"memory_available_bytes", h.mem_available},
               {"simd", h.simd},
               {"libtorch", TORCH_VERSION},
               {"blas", blas.label()},
               {"blas_library", blas.library},
               {"threads", at::get_num_threads()}}},
             {"measurements", measurements},
             {"fingerprint", host_fingerprint()}};
  return p;
}

std::string platform_cache_path() {
  std::string dir;
  if (const char* d = std::getenv("TRAINBENCH_CACHE_DIR"))
    dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"))
    dir = std::string(x) + "/trainbench";
  else if (const char* home = std::getenv("HOME"))
    dir = std::string(home) + "/.cache/trainbench";
  else
    dir = "/tmp/trainbench";
  return dir + "/platform-" + host_info().hostname + ".json";
}

std::optional<PlatformDescription> load_cached_platform(const std::string& path,
                                                        const nlohmann::json& fingerprint,
                                                        std::string* why) {
  std::ifstream in(path);
  if (!in) {
    if (why) *why = "no cached description at " + path;
    return std::nullopt;
  }
  try {
    PlatformDescription p = parse_platform(nlohmann::json::parse(in), path);
    const auto& old = p.extra.value("fingerprint", nlohmann::json::object());
    for (const auto& [key, value] : fingerprint.items()) {
      if (!old.contains(key) || old[key] != value) {
        if (why)
          *why = fmt::format("{} changed: {} -> {}", key,
                             old.contains(key) ? old[key].dump() : "(none)", value.dump());
        return std::nullopt;
      }
    }
    return p;
  } catch (const std::exception& e) {
    if (why) *why = std::string("unreadable cache: ") + e.what();
    return std::nullopt;
  }
}

void save_cached_platform(const std::string& path, const PlatformDescription& p) {
  mkdirs(path.substr(0, path.find_last_of('/')));
  write_file_atomically(path, to_json(p).dump(2) + "\n");
}

}  // namespace tb
