#pragma once
// A results store filled with synthetic fc runs whose FLOPS utilization follows a known
// linear law, on two platforms: for analysis tests and the report benchmark.
#include <cmath>
#include <random>
#include <string>

#include "spec/config.h"
#include "store/store.h"
#include "support/fake_reference.h"

namespace tb::testing {

struct SyntheticOptions {
  size_t runs =
      200;  // written until this many, over a grid of layers x nodes x batch x 2 platforms
  uint64_t seed = 1;
  double noise = 0.005;
  // Text planted in a failed run's error and a platform's name, to check escaping.
  std::string hostile = "<script>alert('x')</script>&";
  // Also runs of a reference model (support/fake_reference.h) at batches 2, 4, 8 on both
  // platforms, with its own unit (images) and CPU utilization; not counted in `runs`.
  bool reference = false;
};

// util = 0.30 + 0.08 z(log2 batch) + 0.04 z(log2 nodes) - 0.02 z(layers) + noise, where z
// standardizes over the grid; platform "fast" is 1.5x faster for batch >= 1024 and 0.8x
// below (so the winner flips); nodes * batch above 2^22 is oom-predicted.
inline void fill_synthetic_store(Store& store, const SyntheticOptions& o) {
  nlohmann::json desc_slow = {{"schema_version", 1},
                              {"name", "slow"},
                              {"kind", "cpu"},
                              {"memory_bandwidth_gbps", 20.0},
                              {"memory_gb", 64.0},
                              {"peak_tflops", {{"fp32", 0.4}}},
                              {"cache_bandwidth_gbps", {{"l1", 300.0}, {"l2", 120.0}}},
                              {"source", "measured by a synthetic test"},
                              {"spec_peak_tflops", {{"fp32", 0.5}}}};
  nlohmann::json desc_fast = desc_slow;
  desc_fast["name"] = "fast";
  desc_fast["peak_tflops"]["fp32"] = 0.6;
  const int64_t slow = store.platform_id({{"host", "slow"}}, "slow", desc_slow);
  const int64_t fast = store.platform_id({{"host", "fast"}}, "fast " + o.hostile, desc_fast);
  const int64_t stack = store.stack_id({{"blas", "openblas"}});
  // Grid sized to the requested count: layers x nodes x batch x 2 platforms.
  const int per_axis = std::max(2, int(std::ceil(std::cbrt(double(o.runs) / 2.0) - 1e-9)));
  size_t written = 0;
  std::vector<double> layers, lnodes, lbatch;
  for (int i = 0; i < per_axis; ++i) {
    layers.push_back(1 + i);
    lnodes.push_back(6 + 7.0 * i / std::max(1, per_axis - 1));
    lbatch.push_back(4 + 10.0 * i / std::max(1, per_axis - 1));
  }
  auto z = [](const std::vector<double>& v, double x) {
    double m = 0, ss = 0;
    for (double e : v) m += e;
    m /= double(v.size());
    for (double e : v) ss += (e - m) * (e - m);
    return (x - m) / std::sqrt(ss / double(v.size()));
  };
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> noise(0, o.noise);
  if (o.reference) {
    register_fake_reference();
    for (int64_t platform : {slow, fast})
      for (int64_t batch : {2, 4, 8}) {
        const std::string config =
            make_config(kFakeReference, {{"batch", std::to_string(batch)}, {"threads", "2"}}).str();
        if (store.run_status(config, platform, stack) != "") continue;
        const double peak = platform == fast ? 0.6e12 : 0.4e12;
        const double util = 0.05 * std::log2(double(batch)), params = 68;
        const double flops = 6 * params * double(batch), step = flops / (util * peak);
        nlohmann::json r = {{"config", config}, {"status", "ok"}};
        r["metrics"] = {{"examples_per_s", double(batch) / step},
                        {"unit", "images"},
                        {"units_per_s", 2.0 * double(batch) / step},
                        {"achieved_flops", flops / step},
                        {"flops_utilization", util},
                        {"cpu_utilization_process", 0.4 + 0.1 * std::log2(double(batch))},
                        {"peak_flops", peak}};
        r["timing"] = {{"mean_s", step},
                       {"median_s", step},
                       {"ci95_relative", 0.004},
                       {"samples", 40},
                       {"end_reason", "converged"}};
        r["cost"] = {{"source", "analytic"},
                     {"params", int64_t(params)},
                     {"flops_per_step", flops},
                     {"bytes_per_step", 4 * 3 * params},
                     {"arithmetic_intensity", flops / (4 * 3 * params)}};
        store.add_run(r, platform, stack, "suite", false);
      }
  }
  for (int64_t platform : {slow, fast})
    for (double l : layers)
      for (double ln : lnodes)
        for (double lb : lbatch) {
          if (written == o.runs) return;
          const int64_t nodes = int64_t(std::llround(std::exp2(ln))),
                        batch = int64_t(std::llround(std::exp2(lb)));
          const std::string config = "fc:layers=" + std::to_string(int(l)) +
                                     ",nodes=" + std::to_string(nodes) +
                                     ",input=2000,output=200,batch=" + std::to_string(batch) +
                                     ",dtype=fp32,optimizer=rmsprop,threads=2,device=cpu";
          if (store.run_status(config, platform, stack) != "") continue;
          nlohmann::json r = {{"config", config}, {"status", "ok"}};
          if (nodes * batch > (int64_t(1) << 22)) {
            r["status"] = "oom-predicted";
            r["error"] = "estimated 99 GiB exceeds the limit " + o.hostile;
          } else {
            double util = 0.30 + 0.08 * z(lbatch, lb) + 0.04 * z(lnodes, ln) - 0.02 * z(layers, l) +
                          noise(rng);
            if (platform == fast) util *= batch >= 1024 ? 1.5 * 0.4 / 0.6 : 0.8 * 0.4 / 0.6;
            const double peak = platform == fast ? 0.6e12 : 0.4e12;
            const double params =
                l * double(nodes) * double(nodes) + 2000.0 * double(nodes) + 200.0 * double(nodes);
            const double flops = 6 * params * double(batch);
            const double step = flops / (util * peak);
            const double bytes = 4 * (3 * params + 2 * double(batch) * double(nodes) * l);
            r["metrics"] = {{"examples_per_s", double(batch) / step},
                            {"achieved_flops", flops / step},
                            {"flops_utilization", util},
                            {"peak_flops", peak}};
            r["timing"] = {{"mean_s", step},
                           {"median_s", step},
                           {"ci95_relative", 0.004},
                           {"samples", 40},
                           {"end_reason", "converged"}};
            r["cost"] = {{"params", int64_t(params)},
                         {"flops_per_step", flops},
                         {"bytes_per_step", bytes},
                         {"arithmetic_intensity", flops / bytes}};
          }
          store.add_run(r, platform, stack, "synthetic", false);
          ++written;
        }
}

}  // namespace tb::testing
