#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>

#include "base/errors.h"
#include "platform/core_latency.h"
#include "platform/registry.h"
#include "record/context.h"
#include "record/json.h"
#include "report/platform_table.h"
#include "runner/characterize.h"
#include "runner/measure.h"

namespace tb {
namespace {

const std::string kRegistry = std::string(TB_SOURCE_DIR) + "/platforms";

TEST(PlatformRegistry, RidgePointsMatchTheParaDnnPaper) {
  // ParaDnn section 4.5: TPU v2's ridge is 75 FLOPs/byte (180 TFLOPS / 2.4 TB/s); v3's ~117.
  EXPECT_DOUBLE_EQ(*find_platform("tpu-v2-board").ridge("bf16"), 75.0);
  EXPECT_NEAR(*find_platform("tpu-v3-board").ridge("bf16"), 117, 0.5);
  // The list's ridge is at the highest floating-point peak, and int8's peak is in TOPS: A100's
  // ridge is bf16's 312 / 2.039 = 153, not int8's 624 / 2.039.
  const std::string list = format_platform_list({find_platform("a100-sxm4-80gb")});
  EXPECT_NE(list.find(" 153 "), std::string::npos) << list;
  EXPECT_NE(list.find("int8 624 TOPS"), std::string::npos) << list;
}

TEST(PlatformRegistry, EveryFileValidatesAndThePapersPlatformsArePresent) {
  std::set<std::string> names;
  for (const char* file :
       {"n1-standard-32-skylake", "v100-sxm2-16gb", "tpu-v2-board", "tpu-v3-board", "quadro-p4000",
        "titan-xp", "xeon-e5-2680", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb",
        "example-systolic-accelerator", "v100-sxm2-32gb", "a100-sxm4-40gb"}) {
    const PlatformDescription p = load_platform_file(kRegistry + "/" + file + ".json");
    EXPECT_EQ(p.name, file);
    EXPECT_FALSE(p.source.empty());
    EXPECT_FALSE(p.peak_tflops.empty());
    EXPECT_GT(p.memory_gb, 0);
    EXPECT_GT(p.bandwidth(), 0);
    // The written form parses back to the same description.
    const PlatformDescription again = parse_platform(to_json(p), file);
    EXPECT_EQ(to_json(again), to_json(p));
    names.insert(p.name);
  }
  for (const auto& p : list_platforms()) names.erase(p.name);
  EXPECT_TRUE(names.empty()) << "listed platforms miss " << *names.begin();
}

TEST(PlatformRegistry, PaperCpuPeakFollowsItsFormula) {
  // ParaDnn Table 3: 2 FMA x 32 single precision x 16 cores x 2 GHz = 2 SP TFLOPS; the
  // theoretical-peak function must give the same for that machine's description.
  HostInfo skylake;
  skylake.physical_cores = 16;
  skylake.mhz = 2000;
  skylake.simd = {"avx2", "fma", "avx512f"};
  const auto peaks = theoretical_peaks(skylake, 2);
  ASSERT_FALSE(peaks.empty());
  EXPECT_EQ(peaks[0].dtype, "fp32");
  EXPECT_DOUBLE_EQ(peaks[0].flops / 1e12,
                   find_platform("n1-standard-32-skylake").peak_tflops.at("fp32"));
}

HostInfo cpu(const char* vendor, int family, int model, double max_mhz, double nominal_mhz,
             std::vector<std::string> simd) {
  HostInfo h;
  h.vendor = vendor;
  h.cpu_family = family;
  h.cpu_model_number = model;
  h.physical_cores = 2;
  h.max_mhz = max_mhz;
  h.mhz = nominal_mhz;
  h.virtualized = max_mhz == 0;
  h.simd = std::move(simd);
  return h;
}

const TheoreticalPeak& peak_of(const std::vector<TheoreticalPeak>& peaks,
                               const std::string& dtype) {
  for (const auto& p : peaks)
    if (p.dtype == dtype) return p;
  throw std::runtime_error("no " + dtype + " peak");
}

TEST(TheoreticalPeak, AKnownMicroarchitectureAtItsMaximumClockIsVerified) {
  // Emerald Rapids (family 6, model 207): two 512-bit FMA units, 64 fp32 FLOPs per cycle.
  const auto peaks = theoretical_peaks(
      cpu("GenuineIntel", 6, 207, 3800, 2100, {"avx2", "fma", "avx512f", "avx512_bf16"}), 0);
  const auto& fp32 = peak_of(peaks, "fp32");
  EXPECT_DOUBLE_EQ(fp32.flops, 2 * 3.8e9 * 64);
  EXPECT_TRUE(fp32.verified);
  EXPECT_EQ(fp32.caveat, "");
  EXPECT_NE(fp32.formula.find("Sapphire Rapids/Emerald Rapids"), std::string::npos) << fp32.formula;
  EXPECT_DOUBLE_EQ(peak_of(peaks, "bf16").flops, 2 * 3.8e9 * 128);
}

TEST(TheoreticalPeak, OnAVirtualMachineWithoutClockLimitsItIsAnUnverifiedEstimate) {
  // This project's VMs: model 207, /proc/cpuinfo says 2.3 GHz, no cpufreq; fp32 GEMM
  // measured 121% of the peak that nominal clock implies.
  const auto peaks = theoretical_peaks(
      cpu("GenuineIntel", 6, 207, 0, 2300, {"avx2", "fma", "avx512f", "avx512_bf16"}), 0);
  const auto& fp32 = peak_of(peaks, "fp32");
  EXPECT_DOUBLE_EQ(fp32.flops, 2 * 2.3e9 * 64);
  EXPECT_FALSE(fp32.verified);
  EXPECT_NE(fp32.caveat.find("nominal"), std::string::npos) << fp32.caveat;
  EXPECT_NE(fp32.caveat.find("virtual machine"), std::string::npos) << fp32.caveat;
}

TEST(TheoreticalPeak, AmdCoresGetTheirOwnDatapathsNotIntelsPortCount) {
  const std::vector<std::string> avx512 = {"avx2", "fma", "avx512f", "avx512_bf16"};
  // Zen 4 (family 19h, model 11h) runs AVX-512 on two 256-bit pipes: 32 fp32 FLOPs/cycle.
  const auto zen4 = theoretical_peaks(cpu("AuthenticAMD", 25, 0x11, 3700, 2600, avx512), 0);
  EXPECT_DOUBLE_EQ(peak_of(zen4, "fp32").flops, 2 * 3.7e9 * 32);
  EXPECT_DOUBLE_EQ(peak_of(zen4, "bf16").flops, 2 * 3.7e9 * 64);
  EXPECT_TRUE(peak_of(zen4, "bf16").verified);
  // Zen 5 (family 1Ah) has full 512-bit datapaths on server parts.
  const auto zen5 = theoretical_peaks(cpu("AuthenticAMD", 26, 0x02, 4100, 2600, avx512), 0);
  EXPECT_DOUBLE_EQ(peak_of(zen5, "fp32").flops, 2 * 4.1e9 * 64);
  EXPECT_NE(peak_of(zen5, "fp32").caveat.find("mobile"), std::string::npos);
}

TEST(TheoreticalPeak, AnUnknownCpuOrGivenFmaUnitsAreEstimatesFromTheFlags) {
  const std::vector<std::string> flags = {"avx2", "fma", "avx512f"};
  const auto unknown = theoretical_peaks(cpu("HygonGenuine", 24, 1, 3000, 3000, flags), 0);
  EXPECT_DOUBLE_EQ(peak_of(unknown, "fp32").flops, 2 * 3e9 * 2 * 16 * 2);
  EXPECT_FALSE(peak_of(unknown, "fp32").verified);
  EXPECT_NE(peak_of(unknown, "fp32").caveat.find("not known"), std::string::npos);
  const auto given = theoretical_peaks(cpu("GenuineIntel", 6, 85, 3000, 2000, flags), 1);
  EXPECT_DOUBLE_EQ(peak_of(given, "fp32").flops, 2 * 3e9 * 1 * 16 * 2);
  EXPECT_FALSE(peak_of(given, "fp32").verified);
  // A VM that hides AVX-512 from a Skylake-SP core: its AVX2 rate, not the table's.
  const auto hidden = theoretical_peaks(cpu("GenuineIntel", 6, 85, 3000, 2000, {"avx2", "fma"}), 0);
  EXPECT_DOUBLE_EQ(peak_of(hidden, "fp32").flops, 2 * 3e9 * 32);
}

std::string error_of(const std::string& text) {
  try {
    parse_platform(nlohmann::json::parse(text), "bad.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(PlatformDescription, MalformedFilesNameTheField) {
  const std::string ok =
      R"({"schema_version":1,"name":"x","kind":"gpu","source":"s","memory_gb":1,)"
      R"("memory_bandwidth_gbps":1,"peak_tflops":{"fp32":1}})";
  EXPECT_EQ(error_of(ok), "no error");
  auto without = [&](const std::string& key) {
    auto j = nlohmann::json::parse(ok);
    j.erase(key);
    return j.dump();
  };
  auto with = [&](const std::string& key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(ok);
    j[key] = v;
    return j.dump();
  };
  EXPECT_EQ(error_of(without("memory_gb")), "bad.json: field 'memory_gb': missing");
  EXPECT_EQ(error_of(without("source")), "bad.json: field 'source': missing");
  EXPECT_NE(error_of(with("memory_gb", -1)).find("field 'memory_gb'"), std::string::npos);
  EXPECT_NE(error_of(with("memory_gb", "lots")).find("expected a number"), std::string::npos);
  EXPECT_NE(error_of(with("peak_tflops", {{"fp99", 1}})).find("'peak_tflops.fp99': unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(with("peak_tflops", {{"bf16", 0}})).find("'peak_tflops.bf16'"),
            std::string::npos);
  EXPECT_NE(error_of(with("peak_tflops", nlohmann::json::object())).find("'peak_tflops'"),
            std::string::npos);
  EXPECT_NE(error_of(with("kind", "quantum")).find("field 'kind'"), std::string::npos);
  EXPECT_NE(error_of(with("schema_version", 2)).find("field 'schema_version'"), std::string::npos);
  EXPECT_NE(error_of(with("name", "My GPU")).find("field 'name'"), std::string::npos);
  EXPECT_NE(
      error_of(with("systolic_array", {{"rows", 0}, {"cols", 4}})).find("systolic_array.rows"),
      std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("expected a JSON object"), std::string::npos);
  for (const std::string& bad : {without("memory_gb"), with("kind", "quantum")}) {
    const std::string message = error_of(bad);
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 0) << message;
  }
}

TEST(PlatformDescription, NotJsonIsOneLine) {
  const std::string path = ::testing::TempDir() + "/not_json.json";
  // A syntax error, and a number past double's range (the parser's out_of_range, which once
  // left as an internal error, exit 3).
  for (const char* text : {"{ \"name\": oops }", "{ \"name\": \"x\", \"memory_gb\": 1e400 }"}) {
    std::ofstream(path) << text;
    try {
      load_platform_file(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("not valid JSON"), std::string::npos) << text;
      EXPECT_NE(what.find(path), std::string::npos) << text;
      EXPECT_EQ(what.find('\n'), std::string::npos) << text;
    }
  }
}

TEST(Roofline, AttainableIsTheMinimumOfTheTwoRoofs) {
  const PlatformDescription p = find_platform("tpu-v2-board");
  EXPECT_DOUBLE_EQ(*p.attainable("bf16", 10), 10 * 2400e9);
  EXPECT_DOUBLE_EQ(*p.attainable("bf16", 75), 180e12);
  EXPECT_DOUBLE_EQ(*p.attainable("bf16", 1000), 180e12);
  EXPECT_FALSE(p.attainable("fp32", 10));
  auto at = place_on_roofline(p, "bf16", 30, 36e12);
  ASSERT_TRUE(at);
  EXPECT_TRUE(at->memory_bound);
  EXPECT_DOUBLE_EQ(at->fraction_of_roof(), 0.5);
}

TEST(PlatformCache, InvalidatedWhenHardwareOrLibraryChanges) {
  const std::string path = ::testing::TempDir() + "/platform-cache-test.json";
  PlatformDescription p = find_platform("xeon-e5-2680");
  const nlohmann::json fp = host_fingerprint();
  p.extra["fingerprint"] = fp;
  save_cached_platform(path, p);
  std::string why;
  ASSERT_TRUE(load_cached_platform(path, fp, &why)) << why;
  for (const char* key : {"libtorch", "cpu_model", "blas", "logical_cpus", "memory_gib"}) {
    nlohmann::json changed = fp;
    changed[key] = "something else";
    EXPECT_FALSE(load_cached_platform(path, changed, &why)) << key;
    EXPECT_NE(why.find(std::string(key) + " changed"), std::string::npos) << why;
  }
  // A cache written before descriptions carried a convolution curve is measured again.
  nlohmann::json before = fp;
  before["method_version"] = 2;
  p.extra["fingerprint"] = before;
  save_cached_platform(path, p);
  EXPECT_FALSE(load_cached_platform(path, fp, &why));
  EXPECT_NE(why.find("method_version changed: 2 -> 11"), std::string::npos) << why;
  EXPECT_FALSE(load_cached_platform(path + ".missing", fp, &why));
  std::ofstream(path) << "garbage";
  EXPECT_FALSE(load_cached_platform(path, fp, &why));
  EXPECT_NE(why.find("unreadable"), std::string::npos);
}

// A serial suite: with other tests on the same cores the two spinning threads may not both run
// within the probe's deadline, which gives no figure.
TEST(PlatformMeasure, CoreRoundTripIsTakenBetweenTheFirstTwoAllowedCpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to measure between";
  const auto rt = core_round_trip();
  ASSERT_TRUE(rt.has_value());
  EXPECT_EQ(rt->cpu_a, cpus[0]);
  EXPECT_EQ(rt->cpu_b, cpus[1]);
  // Any machine's cores answer within tens of nanoseconds to a few microseconds.
  EXPECT_GT(rt->ns, 5.0);
  EXPECT_LT(rt->ns, 20000.0);
  // The context carries it under runtime.
  const auto j = to_json(current_context());
  ASSERT_TRUE(j["runtime"]["core_round_trip"].is_object()) << j["runtime"].dump();
  EXPECT_EQ(j["runtime"]["core_round_trip"]["cpus"], nlohmann::json::array({cpus[0], cpus[1]}));
  EXPECT_GT(j["runtime"]["core_round_trip"]["ns"].get<double>(), 0.0);

  // Restricted to one CPU (this thread's affinity, which the probe reads): no figure, and
  // the context says null rather than leaving the key out.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[0], &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const auto none = core_round_trip();
  const auto j1 = to_json(current_context());
  ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
  EXPECT_FALSE(none.has_value());
  EXPECT_TRUE(j1["runtime"]["core_round_trip"].is_null()) << j1["runtime"].dump();
}

TEST(PlatformMeasure, CacheBandsUseTheSweepPlateaus) {
  HostInfo h;
  h.caches = {
      {1, "Data", 32 << 10, 2}, {1, "Instruction", 32 << 10, 2}, {2, "Unified", 1 << 20, 2}};
  std::vector<WorkingSetPoint> sweep;
  for (int64_t b = 16 << 10; b <= 8 << 20; b *= 2)
    sweep.push_back({b, {{b <= 32 << 10 ? 300.0 : b <= 1 << 20 ? 100.0 : 20.0}}});
  const auto levels = cache_bandwidths(h, sweep);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0], (std::pair<std::string, double>("l1", 300)));
  EXPECT_EQ(levels[1], (std::pair<std::string, double>("l2", 100)));
}

TEST(PlatformMeasure, QuickCharacterizationIsAValidDescription) {
  CharacterizeOptions o;
  o.gemm_sizes = {128, 256};
  o.dtypes = {"fp32"};
  o.trials = 2;
  o.trial_s = 0.02;
  o.sweep = false;
  o.stream_elements = 1 << 20;
  o.gemm_rows = {16, 64};
  o.gemm_rows_sizes = {128, 512};
  // 32x32 maps of 128 channels, 3 x 2 x 8192 x 128 x 9 x 128 FLOPs, are past
  // kConvGridMaxFlops: not measured.
  o.conv_grid_sides = {4, 32};
  o.conv_grid_channels = {16, 128};
  const PlatformDescription p = characterize_host(o);
  EXPECT_GT(p.peak_tflops.at("fp32"), 0);
  EXPECT_GT(p.memory_bandwidth_gbps, 0);
  // The steadiness GEMM at its four points, their spread, and a warning exactly when the
  // spread passes the limit.
  const auto& steady = p.extra["measurements"]["steadiness"];
  ASSERT_EQ(steady["points"].size(), 4u);
  double lo = 1e300, hi = 0;
  for (const auto& pt : steady["points"]) {
    lo = std::min(lo, pt["gflops"].get<double>());
    hi = std::max(hi, pt["gflops"].get<double>());
  }
  EXPECT_GT(lo, 0);
  EXPECT_DOUBLE_EQ(steady["max_over_min"].get<double>(), hi / lo);
  EXPECT_EQ(steady.contains("warning"), hi / lo > kSteadinessLimit);
  EXPECT_NE(format_platform(p).find("steady "), std::string::npos);
  const auto& m = p.extra["measurements"];
  EXPECT_TRUE(m["stream"]["validated"].get<bool>());
  EXPECT_EQ(m["gemm"]["fp32"]["sizes"][0]["trials"].size(), 2u);  // every trial kept
  // The efficiency comes from the micro-benchmarks stored beside it.
  ASSERT_TRUE(p.efficiency);
  EXPECT_GT(p.efficiency->op_overhead_us, 0);
  EXPECT_EQ(m["overhead"]["forward"]["trials"].size(), 2u);
  EXPECT_DOUBLE_EQ(p.efficiency->op_overhead_us,
                   (m["overhead"]["forward"]["median"].get<double>() +
                    m["overhead"]["backward"]["median"].get<double>()) /
                       2);
  // An optimizer step per parameter for every optimizer a config can name, the median of its
  // trials.
  const auto& steps = p.efficiency->optimizer_ns_per_param.at("fp32");
  EXPECT_EQ(steps.size(), 5u);
  for (const auto& [opt, ns] : steps) {
    EXPECT_GT(ns, 0) << opt;
    EXPECT_EQ(m["optimizer_steps"]["fp32"][opt]["trials"].size(), 2u) << opt;
    EXPECT_DOUBLE_EQ(ns, m["optimizer_steps"]["fp32"][opt]["median"].get<double>()) << opt;
  }
  for (const auto& pt : p.efficiency->gemm.at("fp32")) {
    EXPECT_TRUE(pt.n == 128 || pt.n == 256) << pt.n;
    EXPECT_GT(pt.fraction_of_peak, 0);
    EXPECT_LE(pt.fraction_of_peak, 1);
  }
  // A linear layer's GEMMs at batch rows: every rows x n pair measured, rows first, its trials
  // kept, and a fraction for each point above twice the floor.
  const auto& stored = m["gemm_rows"]["fp32"]["points"];
  ASSERT_EQ(stored.size(), 4u);
  EXPECT_EQ(stored[1]["rows"], 16);
  EXPECT_EQ(stored[1]["n"], 512);
  EXPECT_EQ(stored[2]["rows"], 64);
  for (const auto& pt : stored) EXPECT_EQ(pt["trials"].size(), 2u);
  const auto& kept = p.efficiency->gemm_rows.at("fp32");
  ASSERT_GE(kept.size(), 1u);
  for (size_t i = 1; i < kept.size(); ++i)  // by rows, then n
    EXPECT_TRUE(kept[i - 1].rows < kept[i].rows ||
                (kept[i - 1].rows == kept[i].rows && kept[i - 1].n < kept[i].n));
  for (const auto& pt : p.efficiency->gemm_rows.at("fp32")) {
    EXPECT_GT(pt.fraction_of_peak, 0);
    EXPECT_LE(pt.fraction_of_peak, 1);
  }
  // Convolutions on the run's threads: the grid's shapes under the cap, rows = 8 x side^2,
  // every trial kept; the fractions kept by rows, then channels, each in (0, 1].
  const auto& grid = m["conv_rows"]["fp32"]["points"];
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_EQ(grid[0]["rows"], 128);
  EXPECT_EQ(grid[1]["rows"], 128);
  EXPECT_EQ(grid[1]["channels"], 128);
  EXPECT_EQ(grid[2]["rows"], 8192);
  EXPECT_EQ(grid[2]["channels"], 16);
  for (const auto& pt : grid) EXPECT_EQ(pt["trials"].size(), 2u);
  // The two 1e8-FLOP shapes are far above their fixed time: both kept.
  ASSERT_TRUE(p.efficiency->conv_rows.count("fp32"));
  const auto& conv_rows = p.efficiency->conv_rows.at("fp32");
  ASSERT_GE(conv_rows.size(), 2u);
  for (size_t i = 0; i < conv_rows.size(); ++i) {
    EXPECT_GT(conv_rows[i].fraction_of_peak, 0);
    EXPECT_LE(conv_rows[i].fraction_of_peak, 1);
    if (i > 0)
      EXPECT_TRUE(
          conv_rows[i - 1].rows < conv_rows[i].rows ||
          (conv_rows[i - 1].rows == conv_rows[i].rows && conv_rows[i - 1].n < conv_rows[i].n));
  }
  // Each cell's elementwise time per gate element, the median of its trials, kept beside them.
  for (const char* cell : {"rnn", "lstm", "gru"}) {
    const auto& t = m["cell_elementwise"][cell];
    EXPECT_EQ(t["trials"].size(), 2u) << cell;
    if (t["median"].get<double>() > 0)
      EXPECT_DOUBLE_EQ(p.efficiency->cell_ns_per_element.at(cell), t["median"].get<double>());
  }
  EXPECT_FALSE(p.efficiency->cell_ns_per_element.empty());
  // Each elementwise layer's call, forward and backward trials kept, and their medians.
  for (const char* op : {"batchnorm", "maxpool", "avgpool", "relu", "add"}) {
    const auto& t = m["layer_calls"][op];
    EXPECT_EQ(t["forward"]["trials"].size(), 2u) << op;
    EXPECT_EQ(t["backward"]["trials"].size(), 2u) << op;
    EXPECT_DOUBLE_EQ(p.efficiency->layer_call_us.at(op).forward,
                     t["forward"]["median"].get<double>())
        << op;
    EXPECT_DOUBLE_EQ(p.efficiency->layer_call_us.at(op).backward,
                     t["backward"]["median"].get<double>())
        << op;
    // The pools' extra layers read 1 x 1 maps; the others the whole 16 x 8 x 4 x 4.
    const bool pool = std::string(op) == "maxpool" || std::string(op) == "avgpool";
    EXPECT_DOUBLE_EQ(p.efficiency->layer_call_us.at(op).elements, pool ? 128 : 2048) << op;
    EXPECT_EQ(t["elements"], p.efficiency->layer_call_us.at(op).elements) << op;
  }
  // The layers per time step on the whole grid, every point's trials kept; a cell whose grid
  // came out whole is in the table.
  constexpr size_t kGrid = std::size(kCellTableHidden) * std::size(kCellTableBatch);
  EXPECT_EQ(m["cell_step_table"]["points"].size(), 3 * kGrid);
  for (const auto& pt : m["cell_step_table"]["points"]) EXPECT_EQ(pt["trials"].size(), 2u);
  EXPECT_FALSE(p.efficiency->cell_step_table.empty());
  for (const auto& [cell, pts] : p.efficiency->cell_step_table)
    EXPECT_EQ(pts.size(), kGrid) << cell;
  EXPECT_TRUE(p.efficiency->working_set.empty());  // no sweep, no curve
  EXPECT_EQ(to_json(parse_platform(to_json(p), "measured")), to_json(p));
}

// A batch-row point is its three calls' time less three floors; within twice that, left out.
TEST(PlatformMeasure, BatchRowPointsTakeThreeCallFloorsOut) {
  RowsGemm fast{16, 64, 3 * 2.0 * 16 * 64 * 64, {}}, slow{64, 512, 3 * 2.0 * 64 * 512 * 512, {}};
  fast.gflops.values = {fast.flops / 5e-6 / 1e9};    // 5 us for three calls: under 2 x 3 us
  slow.gflops.values = {slow.flops / 103e-6 / 1e9};  // 103 us: 100 us of work beyond the floors
  const auto f = rows_gemm_fractions({fast, slow}, 2000, 1.0);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rows, 64);
  EXPECT_NEAR(f[0].fraction, slow.flops / 100e-6 / 1e9 / 2000, 1e-12);
}

// A point is what its call takes beyond the per-call floor; where that is less than the floor
// itself, the floor's spread decides it, and the point is not kept.
TEST(PlatformMeasure, EfficiencyPointsWithinTwiceTheFloorAreLeftOut) {
  // Peak 100 GFLOP/s, floor 1 us. n=16: 8192 FLOPs in 1.05 us (0.05 us of kernel: it would
  // read as 100%); n=32: in 1.9 us (0.9 us); n=64: 524288 FLOPs in 11.5 us (10.5 us: 50%).
  const std::vector<RatePoint> points = {
      {16, 8192, 8192 / 1.05e3}, {32, 65536, 65536 / 1.9e3}, {64, 524288, 524288 / 11.5e3}};
  const auto curve = efficiency_curve(points, 100, 1.0);
  ASSERT_EQ(curve.size(), 1u);
  EXPECT_EQ(curve[0].first, 64);
  EXPECT_NEAR(curve[0].second, 524288 / 10.5e-6 / 100e9, 1e-12);
  // With no floor every point stays.
  EXPECT_EQ(efficiency_curve(points, 100, 0).size(), 3u);
}

}  // namespace
}  // namespace tb
