// Every registered family's profile, checked as a measuring instrument must be: no operator
// runs faster than the machine can compute. One that does has over-attributed FLOPs (the
// first convolution's backward once showed 188% of peak because it was credited with an input
// gradient LibTorch never computes). The families are the registry's: a family added later is
// checked with nothing to edit here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "spec/family.h"
#include "support/cli.h"
#include "support/unset_env.h"

namespace tb {
namespace {

// A config big enough for its convolutions and products to approach the peak, small enough
// to profile in seconds on one core: every size at a quarter of its default (at least its
// minimum; a size whose default is 0, derived or off, stays so), one thread, one worker. ""
// for a family whose input is a file.
std::string quarter_config(const FamilySchema& f) {
  std::string text = f.name + ":";
  bool first = true;
  for (const auto& p : f.params) {
    std::string v;
    if (p.name == "threads" || p.name == "workers") {
      v = "1";
    } else if (p.is_text()) {
      if (p.default_value.empty()) return "";
      continue;
    } else if (p.is_choice() || p.name == "device" || p.default_value.empty()) {
      continue;
    } else {
      // A quarter of the default, still divisible by the powers of two (up to 32) that
      // divide the default: some sizes must be (an FPN's image side, a multiple of 32).
      const int64_t d = std::stoll(p.default_value);
      if (d == 0) continue;  // 0 means "derived from the others" or "off" (gpt's ff, zero)
      int64_t step = 1;
      while (step < 32 && d % (2 * step) == 0) step *= 2;
      int64_t q = d / 4;
      if (q >= step) q = q / step * step;
      v = std::to_string(std::max<int64_t>(std::max<int64_t>(p.min, 1), q));
    }
    text += (first ? "" : ",") + p.name + "=" + v;
    first = false;
  }
  return text;
}

using tb::test::Unset;

TEST(FamilyProfiles, NoOperatorRunsAboveTheMeasuredPeak) {
  // The peak as `trainbench platform` measures it (in trainbench's own runtime environment:
  // its BLAS and kernels), on the one thread the profiles use. A machine whose environment
  // names OpenBLAS's kernels (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU, as one image here
  // does) measures half the GEMM peak that oneDNN's convolutions then exceed: the check is of
  // FLOP attribution, so it runs with the kernels trainbench would choose itself.
  const Unset core("OPENBLAS_CORETYPE");
  const auto plat = testing::run_cli("platform --threads 1 --quick --json");
  ASSERT_EQ(plat.status, 0) << plat.err;
  // The fastest dense fp32 rate the platform run saw: its GEMM peak, or one of its steadiness
  // probes (a 512^3 GEMM at four moments) where a neighbour slowed the curve's trials down.
  const auto pj = nlohmann::json::parse(plat.out);
  double peak_gflops = pj["peak_tflops"]["fp32"].get<double>() * 1e3;
  for (const auto& point : pj["measurements"]["steadiness"]["points"])
    peak_gflops = std::max(peak_gflops, point["gflops"].get<double>());
  ASSERT_GT(peak_gflops, 0);
  // OpenBLAS's GEMM is not the fastest kernel on every CPU: on an AVX-512 EPYC (Zen 5) oneDNN's
  // 7x1 convolutions ran at 1.15-1.18x the GEMM peak, honestly counted, and the quick
  // measurement stops at n = 512, a few percent under the full one. An over-attributed gradient
  // doubles its operator's rate: 1.3 catches it on any operator at 65% of the peak or more.
  constexpr double kNoise = 1.3;
  // Two profiles at a time where there are two cores: each runs on one thread, and sharing the
  // machine can only slow an operator down, never make it look faster than the peak.
  std::vector<std::string> configs, args;
  for (const FamilySchema* f : family_schemas()) {
    const std::string config = quarter_config(*f);
    if (config.empty()) continue;
    configs.push_back(config);
    args.push_back("profile '" + config + "' --json --warmup 1 --steps 2 --peak-gflops " +
                   std::to_string(peak_gflops));
  }
  const auto outputs = testing::run_cli_all(args);
  int checked = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string& config = configs[i];
    const auto& r = outputs[i];
    if (r.status != 0) {
      ADD_FAILURE() << config << ": exit " << r.status << ": " << r.err;
      continue;
    }
    const auto j = nlohmann::json::parse(r.out)["results"][0];
    ASSERT_EQ(j["status"], "ok") << config << ": " << j.dump();
    double worst = 0;
    std::string worst_op;
    for (const auto& op : j["profile"]["ops"]) {
      if (!op.contains("utilization") || op["utilization"].is_null()) continue;
      const double u = op["utilization"].get<double>();
      EXPECT_LE(u, kNoise) << config << ": " << op["name"].get<std::string>() << " ("
                           << op["shapes"].get<std::string>() << ") at " << 100 * u
                           << "% of the measured " << peak_gflops << " GFLOP/s: its FLOPs are "
                           << "over-attributed";
      if (u > worst) worst = u, worst_op = op["name"].get<std::string>();
    }
    std::cout << config << ": fastest operator " << worst_op << " at " << 100 * worst
              << "% of the peak\n";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace tb
