// The emulation's costs, each against its fp32 counterpart measured in the same run,
// interleaved: (1) quantizer throughput in GB/s (read + write) against this machine's copy
// bandwidth, on arrays 4x the last-level cache (target >= 50%), scaled recipes through a point;
// (1b) the same quantizers in cache on one thread, per element against a copy; (2) a training step
// of the Fashion-MNIST MLP and of an fc config with fp8, NVFP4 and MXFP8 at every quantization
// point against fp32 (targets <= 1.5x, and <= 1.3x at one thread), the fc step's phases, and
// NVFP4's and MXFP8's points one at a time; (3) the custom-MAD matrix
// multiply against torch::mm, and where its time goes (products, their rounding, sums, their
// rounding). They run in the order (2), (3), (1b), (1): see main.
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bench_common.h"
#include "emulation/emulate.h"
#include "emulation/fashion_mnist.h"
#include "emulation/fused_update.h"
#include "emulation/numerics_workload.h"
#include "emulation/torch_quant.h"
#include "model/phase.h"
#include "numerics/mad.h"
#include "numerics/quantize.h"
#include "numerics/scaling.h"
#include "runner/runner.h"
#include "runner/threads.h"
#include "spec/config.h"
#include "spec/printable.h"

namespace {

using namespace tb::bench;
using nlohmann::json;

const char* kUsage =
    "numerics_throughput [--reps N] [--out PATH] [--elements N] [--steps N] [--mad-size N]\n"
    "                    [--sections quant,cache,step,mad] [--only TEXT]\n"
    "Quantizer GB/s vs copy bandwidth, and in cache per element vs a copy; low-precision training\n"
    "steps vs fp32; MAD matmul vs torch::mm.\n"
    "--sections: the parts to run (default all four), always in the order step, mad, cache,\n"
    "quant; the SUMMARY line has theirs.\n"
    "--only: just the quantizers whose name (format/rounding, or a recipe) contains TEXT.\n"
    "Examples:\n"
    "  numerics_throughput --sections quant --only nvfp4 --reps 5\n"
    "  numerics_throughput --sections cache,step --steps 80";

double gbps(size_t n, double s) { return 8.0 * double(n) / s / 1e9; }

// 4x the last-level cache per array, and at most a quarter of memory for both.
size_t default_elements() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = 32l << 20;
  const double mem = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  const double per_array = std::min(4.0 * double(llc), mem / 8.0);
  return std::max(size_t(1) << 25, size_t(per_array / 4.0));
}

// STREAM's copy loop, compiled for the best SIMD level (the library is built for generic x86-64).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void stream_copy(const float* a, float* c, int64_t lo, int64_t hi) {
  for (int64_t j = lo; j < hi; ++j) c[j] = a[j];
}

}  // namespace

int main(int argc, char** argv) {
  // trainbench's runtime (README: its OpenMP spin count and malloc settings) and flushed
  // denormals, as `trainbench` runs; without them the two-thread column measures contention.
  tb::ensure_runtime_environment(argc, argv);
  tb::prepare_runtime();
  const Args args = parse_args(argc, argv, "numerics_throughput", kUsage);
  const int reps = args.reps > 0 ? args.reps : 7;
  const size_t n = size_t(extra_number(args, "elements", double(default_elements())));
  const int64_t steps = int64_t(extra_number(args, "steps", 40));
  const int64_t msize = int64_t(extra_number(args, "mad-size", 128));
  const int threads = tb::apply_threads(0);
  json doc = document("numerics_throughput");
  doc["threads"] = threads;
  std::set<std::string> sections;
  std::string only;  // a quantizer's name must contain it
  for (const auto& [k, v] : args.extra)
    if (k == "only") only = v;
  for (const auto& [k, v] : args.extra)
    if (k == "sections") {
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');) {
        if (part != "quant" && part != "cache" && part != "step" && part != "mad") {
          std::cerr << "numerics_throughput: unknown section '" << tb::printable(part)
                    << "' (quant, cache, step or mad)\n";
          return 2;
        }
        sections.insert(part);
      }
    }
  if (sections.empty()) sections = {"quant", "cache", "step", "mad"};
  if (!only.empty() && !sections.count("quant") && !sections.count("cache")) {
    std::cerr << "numerics_throughput: --only selects quantizers, and neither the quant nor the "
                 "cache section is run\n";
    return 2;
  }
  std::vector<std::string> summary;  // each section's part of the SUMMARY line

  // The quantizers timed, in both the streamed (quant) and the in-cache (cache) sections.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bf16", "nearest-even"},
      {"e4m3", "nearest-even"},
      {"e5m2", "stochastic"},
      {"mxfp8_e4m3", "nearest-even"},
      {"bfp8", "nearest-even"},
      {"fixed:w=8,f=4", "nearest-even"},
      {"e5m2", "nearest-even"},
      {"bf16", "stochastic"},
      {"nvfp4", "nearest-even"},
      {"nvfp4", "stochastic"},
      {"nvfp4_2d", "nearest-even"},
      {"mx:elem=e4m3,block=32,scale=rceil", "nearest-even"},
      // Stochastic block formats and fixed point, and MX with int8 elements: every kind of
      // format the target names, not only the fast ones.
      {"mxfp8_e5m2", "stochastic"},
      {"bfp8", "stochastic"},
      {"fixed:w=8,f=4", "stochastic"},
      {"mx:elem=int8,block=32", "nearest-even"},
      // The two other rounding modes, on a float, an MX and the NVFP4 format.
      {"e4m3", "toward-zero"},
      {"mxfp8_e4m3", "ties-away"},
      {"nvfp4", "ties-away"},
      // And where each kind of format has a kernel path of its own: fixed point's directed
      // modes and its two's-complement wrap-around, BFP's directed modes, MX int8 in blocks of
      // 16 and in the directed modes.
      {"fixed:w=8,f=4", "ties-away"},
      {"fixed:w=8,f=4,sat=off", "nearest-even"},
      {"bfp8", "toward-zero"},
      {"mx:elem=int8,block=16", "stochastic"},
      {"mx:elem=int8,block=32", "ties-away"}};

  // Scaled recipes, timed in the quant section: the work a point does for each
  // (emulation/torch_quant.cc), into the same preallocated output as the formats there: the
  // tensor's amax, then the scaled rounding (current); the scaled rounding with the amax taken in
  // the same pass (delayed: the scale is the history's); or the per-tile amaxes and rounding
  // (block).
  const std::vector<std::string> recipes = {"e4m3@current", "e4m3@delayed", "e4m3@block:1x128"};
  // Checked before any section runs: the step section takes minutes. The cache section times
  // the formats only, not the recipes.
  {
    bool format = false, recipe = false;
    for (const auto& [f, rnd] : cases)
      format = format || (f + "/" + rnd).find(only) != std::string::npos;
    for (const auto& text : recipes) recipe = recipe || text.find(only) != std::string::npos;
    if (sections.count("quant") && !format && !recipe) {
      std::cerr << "numerics_throughput: no quantizer's name contains '" << tb::printable(only)
                << "'\n";
      return 2;
    }
    if (sections.count("cache") && !format) {
      std::cerr << "numerics_throughput: no format the cache section times contains '"
                << tb::printable(only) << "' (it times no recipe)\n";
      return 2;
    }
  }

  // The sections run in this order, the streaming quantizers last: after they stream arrays
  // 4x the last-level cache through every core (4 GiB a rep here), the fc config's one-thread
  // fp32 step ran at 815-930 us for a minute or more, where it runs at 670-710 us otherwise
  // (2-core Zen 5 VM, three runs each way).
  if (sections.count("step")) {
    // (2) Training step: fp32 vs fp8 at every point, same run, interleaved pairs; the median of
    // the pairs' ratios. Two models: emulate's Fashion-MNIST MLP (its own layers; one evaluation of
    // 100 test images at the end of each run is included, small next to the steps), and an fc
    // config through the numerics= wrapper any family gets (synthetic data). At one thread and at
    // all cores: on 2 cores the OpenMP and OpenBLAS thread pools disturb each other, so the
    // one-thread ratio is the emulation's own cost.
    tb::emu::EmulationOptions o;
    o.max_iters = steps;
    o.eval_every = steps;
    o.eval_examples = 100;
    o.target = 1.0;
    o.seeds = 1;
    const std::string fc = "fc:layers=2,nodes=256,input=784,output=10,batch=64,optimizer=momentum";
    // fp8 as before; then NVFP4 and MXFP8 at every point (the issue's <= 1.3x at one thread).
    // MXFP8's blocks of 32 do not divide the 784-element rows of the first layer's input and
    // weights: its formats say partial=on (each such row ends in a block of 16), as the presets
    // mxfp8_e4m3 and mxfp8_e5m2 rounded them before the emulation refused such tensors.
    const std::string mx_e4m3 = "mx:elem=e4m3;block=32;partial=on",
                      mx_e5m2 = "mx:elem=e5m2;block=32;partial=on";
    const std::vector<std::pair<std::string, std::string>> variants = {
        {"fp8", "w:e4m3+a:e4m3+e:e5m2+g:e5m2+o:e5m2+m:e4m3+ls:dynamic:1024"},
        {"nvfp4", "w:nvfp4_2d+a:nvfp4+e:nvfp4/stochastic+g:nvfp4/stochastic+o:nvfp4+m:nvfp4"},
        {"mxfp8", "w:" + mx_e4m3 + "+a:" + mx_e4m3 + "+e:" + mx_e5m2 + "+g:" + mx_e5m2 +
                      "+o:" + mx_e5m2 + "+m:" + mx_e4m3}};
    const tb::emu::Policy fp32;
    // A step's forward, backward and optimizer seconds (model/phase.h), per step: where a
    // variant's extra time goes (the rounding of weights and activations lands in the forward
    // pass, of errors in the backward, of gradients, optimizer state and masters in the update).
    using Phases = std::array<double, 3>;
    // Each phase's median over a config's runs, and a phase triple as JSON.
    const auto phase_medians = [](const std::vector<Phases>& v) {
      Phases m{};
      for (size_t k = 0; k < 3; ++k) {
        std::vector<double> x;
        for (const auto& p : v) x.push_back(p[k]);
        m[k] = median(x);
      }
      return m;
    };
    const auto phase_json = [](const Phases& p) {
      return json{{"forward", p[0]}, {"backward", p[1]}, {"optimizer", p[2]}};
    };
    auto family_step = [&](const std::string& numerics, int th, std::vector<Phases>* phases) {
      tb::apply_threads(th);
      auto t = tb::prepare_training(
          tb::parse_config(fc + ",threads=" + std::to_string(th) + ",numerics=" + numerics),
          torch::kCPU, 1);
      for (int i = 0; i < 5; ++i) tb::train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
      const auto p0 = tb::phase_seconds();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < steps; ++i)
        tb::train_step(*t.workload, *t.optimizer, t.batch, torch::kCPU);
      const double s = seconds_since(t0) / double(steps);
      const auto p1 = tb::phase_seconds();
      if (phases) {
        Phases p{};
        for (int k = 0; k < 3; ++k)
          p[size_t(k)] = (p1[size_t(k) + 1] - p0[size_t(k) + 1]) / double(steps);
        phases->push_back(p);
      }
      return s;
    };
    json step_rows = json::array();
    double step_ratio = 0, step_ratio_1 = 0;  // the fp8 MLP's at all cores and one thread
    std::map<std::string, double> worst_1;    // per variant, the larger of MLP and fc at one thread
    for (const int th : {1, threads}) {
      o.threads = th;
      for (const auto& [name, text] : variants) {
        const tb::emu::Policy policy = tb::emu::policy_from(tb::num::parse_numerics(text), 1);
        // Pairs, each pair's order alternating so neither side always runs first; the ratio is
        // the median of the pairs' ratios (a slow moment of the machine lands on one pair, not
        // on one side), with their range beside it. At least 9 pairs: on a shared 2-core VM
        // single pairs ranged 0.5-3.3x, and the median of 5 moved by 0.2 between processes.
        // At one thread, the same step with the optimizer's update unfused from the state's and
        // masters' rounding (emulation/fused_update.h): what fusing saves, in the same pairs.
        std::vector<double> m32, mq, f32, fq, mrs, frs, mu, fu, mus, fus;
        std::vector<Phases> p32, pq;
        const bool unfused_too = th == 1;
        const auto unfused = [&](const auto& fn) {
          tb::emu::set_fused_updates(false);
          const double t = fn();
          tb::emu::set_fused_updates(true);
          return t;
        };
        auto mlp = [&](const tb::emu::Policy& p) {
          return tb::emu::emulate(o, p).runs[0].seconds / double(steps);
        };
        // The unfused step after the pair on even pairs, before it on odd ones.
        double unfused_m = 0, unfused_f = 0;
        const auto time_unfused = [&] {
          unfused_m = unfused([&] { return mlp(policy); });
          unfused_f = unfused([&] { return family_step(text, th, nullptr); });
        };
        for (int r = 0; r < std::max(9, reps); ++r) {
          if (unfused_too && r % 2 == 1) time_unfused();
          if (r % 2 == 0) {
            m32.push_back(mlp(fp32));
            mq.push_back(mlp(policy));
            f32.push_back(family_step("fp32", th, &p32));
            fq.push_back(family_step(text, th, &pq));
          } else {
            mq.push_back(mlp(policy));
            m32.push_back(mlp(fp32));
            fq.push_back(family_step(text, th, &pq));
            f32.push_back(family_step("fp32", th, &p32));
          }
          mrs.push_back(mq.back() / m32.back());
          frs.push_back(fq.back() / f32.back());
          if (unfused_too) {
            if (r % 2 == 0) time_unfused();
            mu.push_back(unfused_m);
            fu.push_back(unfused_f);
            mus.push_back(mu.back() / mq.back());
            fus.push_back(fu.back() / fq.back());
          }
        }
        const double mr = median(mrs), fr = median(frs);
        const auto range = [](const std::vector<double>& v) {
          return fmt::format("{:.2f}-{:.2f}", *std::min_element(v.begin(), v.end()),
                             *std::max_element(v.begin(), v.end()));
        };
        if (name == "fp8" && th == threads) step_ratio = mr;
        if (name == "fp8" && th == 1) step_ratio_1 = mr;
        if (th == 1) worst_1[name] = std::max(mr, fr);
        std::cout << fmt::format(
            "step, {} thread(s): emulate MLP fp32 {}, {} {}: {:.2f}x ({}) | {} fp32 {}, numerics "
            "{} "
            "{}: {:.2f}x ({})\n",
            th, fmt_time(median(m32)), name, fmt_time(median(mq)), mr, range(mrs),
            "fc 784-256-256-10", fmt_time(median(f32)), name, fmt_time(median(fq)), fr, range(frs));
        // What the variant adds to each phase, in microseconds.
        const Phases ph32 = phase_medians(p32), phq = phase_medians(pq);
        std::cout << fmt::format(
            "  fc phases (forward, backward, optimizer): fp32 {}, {}, {}; {} {}, {}, {} "
            "({:+.0f}, {:+.0f}, {:+.0f} us)\n",
            fmt_time(ph32[0]), fmt_time(ph32[1]), fmt_time(ph32[2]), name, fmt_time(phq[0]),
            fmt_time(phq[1]), fmt_time(phq[2]), (phq[0] - ph32[0]) * 1e6, (phq[1] - ph32[1]) * 1e6,
            (phq[2] - ph32[2]) * 1e6);
        if (unfused_too)
          std::cout << fmt::format(
              "  {} with the optimizer's update unfused from the rounding: MLP {} ({:.2f}x the "
              "fused step, {}), fc {} ({:.2f}x, {})\n",
              name, fmt_time(median(mu)), median(mus), range(mus), fmt_time(median(fu)),
              median(fus), range(fus));
        step_rows.push_back({{"threads", th},
                             {"variant", name},
                             {"numerics", text},
                             {"mlp_fp32_s", median(m32)},
                             {"mlp_s", median(mq)},
                             {"mlp_ratio", mr},
                             {"mlp_pair_ratios", mrs},
                             {"fc_pair_ratios", frs},
                             {"fc_config", fc},
                             {"fc_fp32_s", median(f32)},
                             {"fc_s", median(fq)},
                             {"fc_ratio", fr},
                             {"fc_fp32_phase_s", phase_json(ph32)},
                             {"fc_phase_s", phase_json(phq)}});
        if (unfused_too) {
          step_rows.back()["mlp_unfused_s"] = median(mu);
          step_rows.back()["mlp_unfused_over_fused"] = median(mus);
          step_rows.back()["fc_unfused_s"] = median(fu);
          step_rows.back()["fc_unfused_over_fused"] = median(fus);
        }
      }
    }
    // Point by point, at one thread, for the variants with the 1.3x target: the fc step with
    // each of the variant's points alone against fp32, and all of them, interleaved as above
    // (the order reversed every other rep). Any point makes the step take the fused optimizer
    // update where fused_sgd_step allows it (here it does), on its own faster than LibTorch's
    // SGD, so every row holds that saving once. The row `w:fp32` measures it: its optimizer
    // phase is the fused update with nothing rounded (its weights' identity copy lands in the
    // forward pass); the points' sum counts the saving once. The whole variant's difference
    // from that sum is what its points cost together beyond (or short of) their costs alone.
    json point_rows = json::array();
    for (const auto& [name, text] : variants) {
      if (name == "fp8") continue;
      std::vector<std::string> configs = {"fp32", "w:fp32"};
      std::istringstream items(text);
      for (std::string item; std::getline(items, item, '+');) configs.push_back(item);
      configs.push_back(text);
      std::vector<std::vector<double>> secs(configs.size());
      std::vector<std::vector<Phases>> phases(configs.size());
      for (int r = 0; r < std::max(9, reps); ++r)
        for (size_t k = 0; k < configs.size(); ++k) {
          const size_t j = r % 2 ? configs.size() - 1 - k : k;
          secs[j].push_back(family_step(configs[j], 1, &phases[j]));
        }
      std::vector<double> total(configs.size());
      std::vector<Phases> ph(configs.size());
      for (size_t j = 0; j < configs.size(); ++j) {
        total[j] = median(secs[j]);
        ph[j] = phase_medians(phases[j]);
      }
      std::cout << fmt::format(
          "  fc {}, one thread, each point alone and all together vs fp32 {} (extra us: step = "
          "forward, backward, optimizer; medians of {} interleaved runs):\n",
          name, fmt_time(total[0]), secs[0].size());
      const double update = (ph[1][2] - ph[0][2]) * 1e6;
      double alone = update;
      const size_t last = configs.size() - 1;
      for (size_t j = 1; j < configs.size(); ++j) {
        const double d = (total[j] - total[0]) * 1e6;
        if (j > 1 && j < last) alone += d - update;
        const std::string label = j == 1      ? "w:fp32 (fused update)"
                                  : j == last ? "all of them"
                                              : configs[j];
        std::cout << fmt::format(
            "    {:<24} {:+6.0f} = {:+.0f}, {:+.0f}, {:+.0f}{}\n", label, d,
            (ph[j][0] - ph[0][0]) * 1e6, (ph[j][1] - ph[0][1]) * 1e6, (ph[j][2] - ph[0][2]) * 1e6,
            j < last ? ""
                     : fmt::format(" (the points alone sum to {:+.0f}, the fused update's "
                                   "{:+.0f} counted once)",
                                   alone, update));
        point_rows.push_back({{"variant", name},
                              {"numerics", configs[j]},
                              {"fc_s", total[j]},
                              {"fc_fp32_s", total[0]},
                              {"fc_phase_s", phase_json(ph[j])},
                              {"fc_fp32_phase_s", phase_json(ph[0])}});
        if (j == last) {
          point_rows.back()["points_alone_sum_s"] = alone * 1e-6;
          point_rows.back()["fused_update_saving_s"] = update * 1e-6;
        }
      }
    }
    // What the MLP variants' roundings cost by themselves: the quantize() calls an MLP step
    // makes (its points' tensors, as emulate rounds them), on whole tensors of those shapes in
    // cache, one thread, timed here; against the same run's fp32 MLP step. Nothing else the
    // emulation does is in it (autograd nodes, new tensors, the GEMMs reading rounded inputs),
    // so (fp32 + this) / fp32 is a floor under the step's ratio with these kernels on this CPU.
    json floor_rows = json::array();
    for (const auto& [name, text] : variants) {
      if (name == "fp8") continue;
      double mlp32 = 0;
      for (const auto& row : step_rows)
        if (row["threads"] == 1 && row["variant"] == name) mlp32 = row["mlp_fp32_s"];
      const tb::emu::Policy policy = tb::emu::policy_from(tb::num::parse_numerics(text), 1);
      const int64_t b = o.batch;
      const std::vector<std::vector<int64_t>> params = {{256, 784}, {256},     {128, 256},
                                                        {128},      {10, 128}, {10}},
                                              inputs = {{b, 784}, {b, 256}, {b, 128}, {b, 10}},
                                              errors = {{b, 256}, {b, 128}, {b, 10}};
      // (point, shapes): e rounds the gradients of the activation points but the first (the
      // images need none); w nothing where the masters are kept in its format (emulate.cc).
      std::vector<std::pair<const tb::emu::QuantPoint*, std::vector<int64_t>>> calls;
      const auto add = [&](const tb::emu::QuantPoint& q, const auto& shapes) {
        if (q.enabled())
          for (const auto& sh : shapes) calls.push_back({&q, sh});
      };
      if (!tb::emu::leaves_unchanged(policy.weights, policy.master)) add(policy.weights, params);
      add(policy.activations, inputs);
      add(policy.errors, errors);
      for (const auto* q : {&policy.weight_grads, &policy.optimizer_state, &policy.master})
        add(*q, params);
      std::vector<std::vector<float>> in(calls.size()), out(calls.size());
      std::mt19937 gen(7);
      std::normal_distribution<float> normal(0.0f, 0.05f);
      for (size_t i = 0; i < calls.size(); ++i) {
        int64_t n = 1;
        for (const int64_t d : calls[i].second) n *= d;
        in[i].resize(size_t(n));
        out[i].resize(size_t(n));
        for (auto& v : in[i]) v = normal(gen);
      }
      std::vector<double> per_step;
      for (int r = 0; r < 50; ++r) {
        const auto t0 = Clock::now();
        for (size_t i = 0; i < calls.size(); ++i) {
          const auto& q = *calls[i].first;
          tb::num::QuantOptions qo;
          qo.rounding = q.rounding();
          qo.seed = uint64_t(r) * 131 + i;
          qo.row = size_t(calls[i].second.back());
          tb::num::quantize(q.format(), in[i].data(), out[i].data(), in[i].size(), qo);
        }
        per_step.push_back(seconds_since(t0));
      }
      const double floor_s = median(per_step);
      std::cout << fmt::format(
          "  MLP {}, its step's {} quantize calls alone (whole tensors of the step's shapes, one "
          "thread): {} against fp32's step of {}: {:.2f}x before anything else the emulation "
          "does\n",
          name, calls.size(), fmt_time(floor_s), fmt_time(mlp32), (mlp32 + floor_s) / mlp32);
      floor_rows.push_back({{"variant", name},
                            {"numerics", text},
                            {"quantize_calls", calls.size()},
                            {"quantize_s", floor_s},
                            {"mlp_fp32_s", mlp32},
                            {"floor_ratio", (mlp32 + floor_s) / mlp32}});
    }
    tb::apply_threads(0);
    doc["training_step"] = {{"batch", o.batch},
                            {"model", "mlp 784-256-128-10"},
                            {"rows", step_rows},
                            {"fc_points", point_rows},
                            {"mlp_quantize_floor", floor_rows}};
    summary.push_back(fmt::format(
        "fp8 MLP step {:.2f}x fp32 at one thread, {:.2f}x at all cores (target <= 1.5x); NVFP4 "
        "step {:.2f}x, MXFP8 {:.2f}x at one thread (worse of MLP and fc; target <= 1.3x)",
        step_ratio_1, step_ratio, worst_1["nvfp4"], worst_1["mxfp8"]));
  }

  if (sections.count("mad")) {
    // (3) Custom MAD unit vs torch::mm on M = N = K = msize.
    // The operands are e5m2 values, as the unit's header asks (quantize them first): what an
    // e5m2 multiplier reads, and what lets mad_matmul take its lean kernel (exact products). The
    // same unit on the unquantized operands (24-bit significands, the fused kernel) is timed too.
    torch::manual_seed(3);
    const auto Af = (torch::rand({msize, msize}) - 0.5).contiguous();
    const auto Bf = (torch::rand({msize, msize}) - 0.5).contiguous();
    const auto A = Af.clone(), B = Bf.clone();
    {
      const auto e5m2 = tb::num::parse_format("e5m2");
      tb::num::QuantOptions qo;
      for (const auto* t : {&A, &B})
        tb::num::quantize(e5m2, t->data_ptr<float>(), t->data_ptr<float>(), size_t(t->numel()), qo);
    }
    auto C = torch::empty({msize, msize});
    const std::vector<std::string> units = {
        "mad:mul=fp32,acc=fp32,width=4,order=lanes",  // the loop alone
        "mad:mul=e5m2,acc=fp32,width=4,order=lanes",  // + rounding products
        "mad:mul=fp32,acc=fp16,width=4,order=lanes",  // + rounding sums
        "mad:mul=e5m2,acc=fp16,width=4,order=lanes",  // both
        "mad:mul=e5m2,acc=fp16,width=4,order=sequential"};
    std::vector<double> mm_t;
    std::map<std::string, std::vector<double>> mad_t;
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      torch::mm_out(C, A, B);
      mm_t.push_back(seconds_since(t0));
      for (const auto& u : units) {
        const auto unit = tb::num::parse_mad(u);
        t0 = Clock::now();
        tb::num::mad_matmul(unit, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                            msize, msize, msize, threads);
        mad_t[u].push_back(seconds_since(t0));
      }
    }
    // The same pair on one thread each: no thread pool of either side to wake or to contend
    // with. On two cores the all-cores pair moves with the state the OpenMP and std::thread
    // workers were left in (torch::mm's ~40 us product times a worker's wake-up; the unit's
    // threads share the cores with workers still spinning), by 2x or more between processes.
    std::vector<double> mm1_t, mad1_t, fused1_t;
    const auto full = tb::num::parse_mad(units[3]);
    {
      tb::apply_threads(1);
      for (int r = 0; r < reps; ++r) {
        auto t0 = Clock::now();
        torch::mm_out(C, A, B);
        mm1_t.push_back(seconds_since(t0));
        t0 = Clock::now();
        tb::num::mad_matmul(full, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                            msize, msize, msize, 1);
        mad1_t.push_back(seconds_since(t0));
        t0 = Clock::now();
        tb::num::mad_matmul(full, Af.data_ptr<float>(), Bf.data_ptr<float>(), C.data_ptr<float>(),
                            msize, msize, msize, 1);
        fused1_t.push_back(seconds_since(t0));
      }
      tb::apply_threads(0);
    }
    const auto kernel_of = [&](const tb::num::MadUnit& u, const torch::Tensor& a,
                               const torch::Tensor& b) {
      return tb::num::mad_kernel(u, a.data_ptr<float>(), b.data_ptr<float>(), msize, msize, msize);
    };
    const double flops = 2.0 * double(msize) * double(msize) * double(msize);
    const double mm_gf = flops / median(mm_t) / 1e9;
    const double ratio_1 = median(mad1_t) / median(mm1_t);
    std::cout << fmt::format("matmul {}^3: torch::mm {:.1f} GFLOP/s\n", msize, mm_gf);
    const double fused_ratio_1 = median(fused1_t) / median(mm1_t);
    std::cout << fmt::format(
        "  one thread each: torch::mm {:.1f} GFLOP/s, {} {:.3f} GFLOP/s: {:.1f}x ({} kernel; on "
        "unquantized operands {:.3f} GFLOP/s: {:.1f}x, {} kernel)\n",
        flops / median(mm1_t) / 1e9, units[3], flops / median(mad1_t) / 1e9, ratio_1,
        kernel_of(full, A, B), flops / median(fused1_t) / 1e9, fused_ratio_1,
        kernel_of(full, Af, Bf));
    json mads = json::array();
    for (const auto& u : units) {
      const double gf = flops / median(mad_t[u]) / 1e9;
      const std::string kernel = kernel_of(tb::num::parse_mad(u), A, B);
      std::cout << fmt::format("  {:<48} {:7.3f} GFLOP/s  {:8.1f}x slower  ({} kernel)\n", u, gf,
                               mm_gf / gf, kernel);
      mads.push_back(
          {{"unit", u}, {"gflops", gf}, {"slowdown_vs_mm", mm_gf / gf}, {"kernel", kernel}});
    }
    // Where the time of the full unit (e5m2 products, fp16 sums) goes, in steps of one rounding
    // each: the loops and float32 arithmetic alone (fp32/fp32), then rounded products
    // (e5m2/fp32), then rounded sums too (the full unit). The fp32/fp16 unit is listed for
    // itself: its fp32 products are not on fp16's grid, so it takes the fused kernel (each line
    // above names its kernel) and is not a step of this split.
    const double t_loop = median(mad_t[units[0]]), t_full = median(mad_t[units[3]]);
    const double t_prod = median(mad_t[units[1]]) - t_loop;
    const double t_sum = t_full - median(mad_t[units[1]]);
    std::cout << fmt::format("  where the time of {} goes ({}):\n", units[3], fmt_time(t_full));
    const std::vector<std::pair<std::string, double>> parts = {
        {"loops, loads/stores, fp32 multiply-add", t_loop},
        {"rounding products to e5m2", t_prod},
        {"rounding sums to fp16", t_sum}};
    json breakdown = json::object();
    for (const auto& [what, t] : parts) {
      std::cout << fmt::format("    {:<40} {:8.3f} ms  {:5.1f}%\n", what, t * 1e3,
                               100 * t / t_full);
      breakdown[what] = t;
    }
    doc["matmul"] = {{"size", msize},
                     {"torch_mm_gflops", mm_gf},
                     {"units", mads},
                     {"breakdown_s", breakdown},
                     {"one_thread",
                      {{"torch_mm_s", median(mm1_t)},
                       {"unit", units[3]},
                       {"unit_s", median(mad1_t)},
                       {"slowdown_vs_mm", ratio_1},
                       {"kernel", kernel_of(full, A, B)},
                       {"unquantized_operands_unit_s", median(fused1_t)},
                       {"unquantized_operands_slowdown_vs_mm", fused_ratio_1},
                       {"unquantized_operands_kernel", kernel_of(full, Af, Bf)}}}};

    summary.push_back(
        fmt::format("MAD matmul {:.0f}x slower than torch::mm ({:.0f}x at one thread each)",
                    mm_gf / (flops / median(mad_t[units[3]]) / 1e9), ratio_1));
  }

  if (sections.count("cache")) {
    // (1b) The same quantizers on a tensor that stays in L2 (1 MiB in, 1 MiB out), on one
    // thread: the size of a small model's weight matrix, what a training step's points round
    // (section 2), against a copy of the same tensor. Per element, so that a step's extra time
    // can be read as its points' elements times these.
    const size_t m = 1 << 18;
    std::vector<float> x(m), y(m);
    for (size_t i = 0; i < m; ++i) x[i] = float(std::sin(double(i) * 1e-3) * 100.0);
    const auto ns_per_element = [&](const auto& fn) {
      for (int i = 0; i < 10; ++i) fn();
      std::vector<double> ts;
      for (int r = 0; r < 101; ++r) {
        const auto t0 = Clock::now();
        fn();
        ts.push_back(seconds_since(t0));
      }
      return median(ts) * 1e9 / double(m);
    };
    const double copy_ns =
        ns_per_element([&] { std::memcpy(y.data(), x.data(), m * sizeof(float)); });
    std::cout << fmt::format(
        "in cache, one thread, {} elements (1 MiB each way): copy {:.3f} ns per element\n", m,
        copy_ns);
    json rows = json::array();
    for (const auto& [f, rnd] : cases) {
      const std::string name = f + "/" + rnd;
      if (name.find(only) == std::string::npos) continue;
      tb::num::QuantOptions o;
      o.rounding = tb::num::parse_rounding(rnd);
      o.threads = 1;
      o.row = 1024;
      const auto fmt = tb::num::parse_format(f);
      const double ns = ns_per_element([&] { tb::num::quantize(fmt, x.data(), y.data(), m, o); });
      std::cout << fmt::format("  quantize {:<28} {:6.3f} ns per element  {:5.2f}x the copy\n",
                               name, ns, ns / copy_ns);
      rows.push_back({{"format", name}, {"ns_per_element", ns}, {"over_copy", ns / copy_ns}});
    }
    doc["in_cache"] = {{"elements", m}, {"copy_ns_per_element", copy_ns}, {"quantizers", rows}};
    const auto slowest =
        std::max_element(rows.begin(), rows.end(), [](const json& a, const json& b) {
          return a["ns_per_element"].get<double>() < b["ns_per_element"].get<double>();
        });
    summary.push_back(fmt::format("in cache the slowest quantizer ({}) {:.2f}x the copy",
                                  (*slowest)["format"].get<std::string>(),
                                  (*slowest)["over_copy"].get<double>()));
  }

  if (sections.count("quant")) {
    // (1) Quantizers vs copy bandwidth. The copy is what any elementwise pass over the same
    // bytes must at least take: STREAM's copy loop, on every core, as the quantizer. Arrays are
    // at least 4x the last-level cache (STREAM's rule), or the "bandwidth" is partly the cache's.
    // LibTorch's allocations, as every tensor a quantization point rounds: 64-byte aligned, where
    // quantize() writes whole lines past the caches (a std::vector's 16-byte alignment takes the
    // slower tiled path).
    const torch::Tensor x_tensor = torch::empty({int64_t(n)}),
                        y_tensor = torch::empty({int64_t(n)});
    float* const xp = x_tensor.data_ptr<float>();
    float* const yp = y_tensor.data_ptr<float>();
    {
      std::vector<float> pattern(1 << 20);  // sin() of the whole array would take seconds
      for (size_t i = 0; i < pattern.size(); ++i)
        pattern[i] = float(std::sin(double(i) * 1e-3) * 100.0);
      at::parallel_for(0, int64_t(n), 1 << 20, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e;) {
          const size_t off = size_t(i) % pattern.size();
          const size_t len = std::min(pattern.size() - off, size_t(e - i));
          std::memcpy(xp + i, pattern.data() + off, len * 4);
          std::memset(yp + i, 0, len * 4);
          i += int64_t(len);
        }
      });
    }
    auto copy = [&] {
      at::parallel_for(0, int64_t(n), int64_t(n / size_t(threads)) + 1,
                       [&](int64_t b, int64_t e) { stream_copy(xp, yp, b, e); });
    };
    // The same copy with the non-temporal stores the quantizers use for outputs larger than
    // the last-level cache: the faster of the two copies is the reference.
    auto copy_nt = [&] {
      at::parallel_for(0, int64_t(n), int64_t(n / size_t(threads)) + 1, [&](int64_t b, int64_t e) {
        tb::num::copy_nontemporal(xp + b, yp + b, size_t(e - b));
      });
    };
    // And on std::threads, as quantize() splits its work (split_over_threads), not LibTorch's
    // OpenMP pool: the same copy, the same number of threads.
    // And with each input line requested 4 KiB ahead, as quantize()'s streaming kernels do:
    // on a host where that request is what keeps memory busy, a copy without it would be a
    // reference the quantizers beat.
    auto copy_nt_threads = [&](bool ahead) {
      std::vector<std::thread> pool;
      const size_t per = n / size_t(threads) + 1;
      for (int t = 0; t < threads; ++t) {
        const size_t b = size_t(t) * per, e = std::min(n, b + per);
        if (b < e)
          pool.emplace_back([&, b, e] { tb::num::copy_nontemporal(xp + b, yp + b, e - b, ahead); });
      }
      for (auto& th : pool) th.join();
    };

    std::vector<double> copy_times, copy_nt_times, copy_thr_times, copy_ahead_times, read_times;
    std::map<std::string, std::vector<double>> qt;
    // Delayed scaling's scale, from an earlier step's amax: this tensor's, taken once up front.
    const float delayed_scale =
        tb::num::current_scale(448, tb::num::tensor_amax(xp, n, threads), 0);
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      copy();
      copy_times.push_back(seconds_since(t0));
      t0 = Clock::now();
      copy_nt();
      copy_nt_times.push_back(seconds_since(t0));
      t0 = Clock::now();
      copy_nt_threads(false);
      copy_thr_times.push_back(seconds_since(t0));
      t0 = Clock::now();
      copy_nt_threads(true);
      copy_ahead_times.push_back(seconds_since(t0));
      // A pass that only reads (the tensor's amax): what a second read of the input costs, so
      // the bound of a two-pass quantizer (NVFP4, current scaling) is known in the same run.
      t0 = Clock::now();
      volatile float sink = tb::num::tensor_amax(xp, n, threads);
      (void)sink;
      read_times.push_back(seconds_since(t0));
      for (const auto& [f, rnd] : cases) {
        if ((f + "/" + rnd).find(only) == std::string::npos) continue;
        tb::num::QuantOptions o;
        o.rounding = tb::num::parse_rounding(rnd);
        o.threads = threads;
        o.row = 1024;
        const auto fmt = tb::num::parse_format(f);
        t0 = Clock::now();
        tb::num::quantize(fmt, xp, yp, n, o);
        qt[f + "/" + rnd].push_back(seconds_since(t0));
      }
      for (const auto& text : recipes) {
        if (text.find(only) == std::string::npos) continue;
        const auto at = text.find('@');
        auto fmt = tb::num::parse_format(text.substr(0, at));
        fmt.fp.overflow = tb::num::Overflow::kSaturate;  // as scaled points round
        const auto sc = tb::num::parse_scaling(text.substr(at + 1), fmt, text.substr(0, at));
        tb::num::QuantOptions o;
        o.threads = threads;
        o.row = 1024;
        t0 = Clock::now();
        if (sc.kind == tb::num::Scaling::Kind::kBlock) {
          tb::num::quantize_block_scaled(fmt, sc, xp, yp, n, 1024, o, nullptr);
        } else if (sc.kind == tb::num::Scaling::Kind::kDelayed) {
          // The history's scale is known before the pass; the tensor's amax, for the history, is
          // taken in the rounding pass (QuantOptions::input_amax), as the point does.
          float amax = 0;
          o.scale = delayed_scale;
          o.input_amax = &amax;
          tb::num::quantize(fmt, xp, yp, n, o);
        } else {
          o.scale = tb::num::current_scale(448, tb::num::tensor_amax(xp, n, threads), 0);
          tb::num::quantize(fmt, xp, yp, n, o);
        }
        qt[text].push_back(seconds_since(t0));
      }
    }
    const double plain_gbps = gbps(n, median(copy_times)), nt_gbps = gbps(n, median(copy_nt_times));
    const double thr_gbps = gbps(n, median(copy_thr_times));
    const double ahead_gbps = gbps(n, median(copy_ahead_times));
    const double copy_gbps = std::max({plain_gbps, nt_gbps, thr_gbps, ahead_gbps});
    // The reference's own runs, for ratios paired by run: the machine's memory bandwidth can
    // move between runs (on a shared host, between two levels minutes apart), and a quantizer
    // is set against the copy of its own run rather than the copies' median.
    const std::vector<double>& ref_times = copy_gbps == ahead_gbps ? copy_ahead_times
                                           : copy_gbps == thr_gbps ? copy_thr_times
                                           : copy_gbps == nt_gbps  ? copy_nt_times
                                                                   : copy_times;
    const auto [ref_lo, ref_hi] = std::minmax_element(ref_times.begin(), ref_times.end());
    json quant = json::array();
    std::cout << fmt::format(
        "copy bandwidth (read + write, {} threads, {:.0f} MiB per array): {:.2f} GB/s plain "
        "stores, "
        "{:.2f} GB/s non-temporal (OpenMP), {:.2f} GB/s non-temporal (std::thread, as quantize() "
        "splits), {:.2f} GB/s so with lines requested 4 KiB ahead (as quantize() streams); the "
        "fastest is the reference (its runs: {:.1f}-{:.1f} GB/s)\n",
        threads, double(n) * 4 / (1 << 20), plain_gbps, nt_gbps, thr_gbps, ahead_gbps,
        gbps(n, *ref_hi), gbps(n, *ref_lo));
    // Two passes over the input (the amax, then the rounding that reads it again and writes
    // the output) take at least a read pass plus a copy.
    const double read_s = median(read_times), copy_s = 8.0 * double(n) / copy_gbps / 1e9;
    std::cout << fmt::format(
        "read-only pass (tensor amax): {:.2f} ms against the copy's {:.2f} ms; a quantizer that "
        "reads its input twice is bound at {:.0f}% of copy\n",
        1e3 * read_s, 1e3 * copy_s, 100 * copy_s / (copy_s + read_s));
    doc["read_pass_seconds"] = read_s;
    doc["two_pass_bound_fraction_of_copy"] = copy_s / (copy_s + read_s);
    double worst = 1e9;
    for (const auto& [name, times] : qt) {
      const double g = gbps(n, median(times));
      std::vector<double> paired;
      for (size_t r = 0; r < times.size() && r < ref_times.size(); ++r)
        paired.push_back(ref_times[r] / times[r]);
      const double f = median(paired);
      const auto [lo, hi] = std::minmax_element(paired.begin(), paired.end());
      worst = std::min(worst, f);
      std::cout << fmt::format(
          "  quantize {:<28} {:6.2f} GB/s  {:5.1f}% of copy (runs {:.1f}-{:.1f}%)\n", name, g,
          100 * f, 100 * *lo, 100 * *hi);
      quant.push_back({{"format", name},
                       {"gbps", g},
                       {"fraction_of_copy", f},
                       {"fraction_of_copy_runs", paired}});
    }
    doc["quantizers"] = quant;
    doc["copy_gbps"] = copy_gbps;
    doc["copy_plain_gbps"] = plain_gbps;
    doc["copy_nontemporal_gbps"] = nt_gbps;
    doc["copy_nontemporal_std_thread_gbps"] = thr_gbps;
    doc["copy_nontemporal_ahead_gbps"] = ahead_gbps;
    std::vector<double> ref_gbps;
    for (const double t : ref_times) ref_gbps.push_back(gbps(n, t));
    doc["copy_runs_gbps"] = ref_gbps;
    doc["elements"] = n;
    if (!only.empty()) doc["only"] = only;
    // A reference that moved by a fifth or more between runs: the headline says so.
    const std::string moved =
        *ref_hi >= 1.2 * *ref_lo
            ? fmt::format(", its runs {:.1f}-{:.1f} GB/s", gbps(n, *ref_hi), gbps(n, *ref_lo))
            : "";
    summary.push_back(fmt::format(
        "slowest quantizer{} at {:.0f}% of copy bandwidth ({:.1f} GB/s{}; target >= 50%)",
        only.empty() ? "" : " matching '" + tb::printable(only) + "'", 100 * worst, copy_gbps,
        moved));
  }

  std::cout << "SUMMARY numerics_throughput: " << fmt::format("{}", fmt::join(summary, "; "))
            << "\n";
  write_json(args.out, doc);
  return 0;
}
