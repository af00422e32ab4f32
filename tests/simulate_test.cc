// The accelerator model (src/simulate/): systolic mapping by hand, roofline bounds, format
// width, capacity, and the validation's error arithmetic on a synthetic store.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "analysis/published.h"
#include "analysis/runs.h"
#include "analysis/validation.h"
#include "base/errors.h"
#include "cost/layers.h"
#include "platform/registry.h"
#include "report/html_report.h"
#include "report/platform_table.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"
#include "store/store.h"
#include "support/cli.h"
#include "support/files.h"
#include "support/synthetic_store.h"

namespace tb {
namespace {

PlatformDescription accelerator(double tflops, double gbps, int rows = 0, int cols = 0,
                                const std::string& dataflow = "weight-stationary") {
  PlatformDescription p;
  p.name = "test-accel";
  p.kind = "accelerator";
  p.source = "test";
  p.memory_gb = 16;
  p.memory_bandwidth_gbps = gbps;
  p.peak_tflops = {{"fp32", tflops}, {"bf16", tflops}};
  if (rows > 0) p.systolic_array = PlatformDescription::Systolic{rows, cols, dataflow};
  return p;
}

// The simulated optimizer phase's time (-1 without one).
double optimizer_time(const sim::Simulation& s) {
  for (const auto& l : s.layers)
    if (l.op == "optimizer") return l.time_s();
  return -1.0;
}

StepCost one_linear(double rows, int64_t in, int64_t out) {
  StepCost c;
  c.layers.push_back(cost::linear("fc", rows, in, out, 4, true));
  return c;
}

TEST(Systolic, WeightStationaryFoldsFillAndDrainByHand) {
  // M=10, N=6, K=5 on 4x4: K over rows in ceil(5/4)=2, N over columns in ceil(6/4)=2 -> 4
  // folds; each: fill 3+3, stream M=10, drain (weight load) 4 = 20 cycles.
  const auto m = sim::map_gemm(10, 6, 5, 1, {4, 4, "weight-stationary"});
  EXPECT_EQ(m.folds, 4);
  EXPECT_EQ(m.fill_cycles, 6);
  EXPECT_EQ(m.drain_cycles, 4);
  EXPECT_EQ(m.stream_cycles, 10);
  EXPECT_EQ(m.fold_cycles, 20);
  EXPECT_DOUBLE_EQ(m.cycles, 80);
  EXPECT_DOUBLE_EQ(m.utilization, 300.0 / (16 * 80));
}

TEST(Systolic, OutputStationaryStreamsK) {
  // M=10 over rows in 3, N=6 over columns in 2 -> 6 folds of 6 + 5 + 4 = 15 cycles.
  const auto m = sim::map_gemm(10, 6, 5, 3, {4, 4, "output-stationary"});
  EXPECT_EQ(m.folds, 6);
  EXPECT_EQ(m.fold_cycles, 15);
  EXPECT_DOUBLE_EQ(m.cycles, 3 * 90);
  EXPECT_DOUBLE_EQ(m.utilization, 300.0 / (16 * 90));
}

TEST(Systolic, ALargeGemmApproachesFullUtilization) {
  const auto m = sim::map_gemm(100000, 128, 128, 1, {128, 128, "weight-stationary"});
  EXPECT_EQ(m.folds, 1);
  EXPECT_GT(m.utilization, 0.995);
  EXPECT_LT(m.utilization, 1.0);
}

TEST(Simulate, RooflineBoundSwitchesWithBandwidth) {
  const StepCost c = one_linear(256, 512, 512);
  const auto f32 = [](const PlatformDescription& p) { return sim::resolve_format(p, "fp32"); };
  const auto fast_mem = accelerator(1, 1e6), slow_mem = accelerator(1, 1);
  const auto a = sim::simulate_step(fast_mem, c, 4, f32(fast_mem));
  const auto b = sim::simulate_step(slow_mem, c, 4, f32(slow_mem));
  const auto& l = c.layers[0];
  const double flops = l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops;
  const double bytes = l.bytes_read + l.bytes_written;
  EXPECT_DOUBLE_EQ(a.memory_bound_s, 0);
  EXPECT_NEAR(a.step_s, flops / 1e12, 1e-15);
  EXPECT_DOUBLE_EQ(b.compute_bound_s, 0);
  EXPECT_NEAR(b.step_s, bytes / 1e9, 1e-12);
  EXPECT_EQ(a.layers[0].phases.size(), 3u);
  EXPECT_EQ(a.layers.back().name, "optimizer");
}

TEST(Simulate, HalfTheFormatWidthHalvesTheBytes) {
  const StepCost c = one_linear(256, 512, 512);
  const auto p = accelerator(1, 1);  // memory-bound: time follows bytes
  const auto a = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  const auto b = sim::simulate_step(p, c, 4, sim::resolve_format(p, "bf16"));
  EXPECT_DOUBLE_EQ(b.format.bits, 16);
  EXPECT_NEAR(b.step_s, a.step_s / 2, 1e-12);
  double ba = 0, bb = 0;
  for (const auto& ph : a.layers[0].phases) ba += ph.bytes;
  for (const auto& ph : b.layers[0].phases) bb += ph.bytes;
  EXPECT_DOUBLE_EQ(bb, ba / 2);
}

// A scaling recipe's amax passes: current scaling (and NVFP4's tensor amax) read each GEMM
// input once more in 16 bits, as separate kernels: for one 256 x 512 x 512 linear, the three
// phases' inputs (X + W, dY + W, X + dY) x 2 bytes at the bandwidth. Delayed scaling fuses its
// amax into the cast: nothing added.
TEST(Simulate, ScalingRecipesChargeTheirAmaxPasses) {
  const StepCost c = one_linear(256, 512, 512);
  auto p = accelerator(1, 1);
  p.peak_tflops["fp8"] = 1;
  p.peak_tflops["fp4"] = 1;
  const auto plain = sim::simulate_step(p, c, 4, sim::resolve_format(p, "e4m3"));
  const auto current = sim::simulate_step(p, c, 4, sim::resolve_format(p, "e4m3@current"));
  const auto delayed = sim::simulate_step(p, c, 4, sim::resolve_format(p, "e4m3@delayed:16"));
  const auto& l = c.layers[0];
  const double m = double(l.gemm_m), n = double(l.gemm_n), k = double(l.gemm_k);
  const double bytes = 2 * ((m * k + k * n) + (m * n + k * n) + (m * k + m * n));
  EXPECT_NEAR(current.scale_s, bytes / current.bandwidth, 1e-15);
  EXPECT_NEAR(current.step_s - plain.step_s, current.scale_s, 1e-15);
  EXPECT_EQ(delayed.scale_s, 0);
  EXPECT_DOUBLE_EQ(delayed.step_s, plain.step_s);
  EXPECT_EQ(current.format.scaling, "current");
  EXPECT_EQ(sim::resolve_format(p, "nvfp4").amax_passes, 1);
  EXPECT_DOUBLE_EQ(sim::resolve_format(p, "e4m3@block:1x32").bits, 8 + 1.0);
  EXPECT_THROW(sim::resolve_format(p, "e4m3@weekly"), UsageError);
  EXPECT_THROW(sim::resolve_format(p, "mxfp8_e4m3@current"), UsageError);
}

// With data-parallel workers the simulation is per worker: the ZeRO stage's per-worker memory
// and the bytes each worker sends (cost.h's DataParallelCost), at the format's width.
TEST(Simulate, DataParallelWorkersGetPerWorkerMemoryAndTraffic) {
  const std::string base = "gpt:layers=2,d_model=64,heads=4,seq=32,vocab=100,batch=2,workers=4";
  const auto p = accelerator(1, 1);
  const auto plain = sim::simulate_config(p, parse_config(base), "fp32");
  const auto zero3 = sim::simulate_config(p, parse_config(base + ",zero=3"), "fp32");
  const auto half = sim::simulate_config(p, parse_config(base + ",zero=3"), "bf16");
  EXPECT_EQ(zero3.workers, 4);
  EXPECT_EQ(zero3.zero, 3);
  const StepCost c = step_cost(parse_config(base + ",zero=3"));
  EXPECT_DOUBLE_EQ(zero3.comm_bytes_ideal, c.data_parallel.ideal_bytes_per_step);
  EXPECT_DOUBLE_EQ(half.comm_bytes_ideal, c.data_parallel.ideal_bytes_per_step / 2);
  EXPECT_LT(zero3.memory_bytes, plain.memory_bytes);  // weights, gradients, state sharded
  EXPECT_EQ(zero3.step_s, plain.step_s);              // communication is not modeled in time
  EXPECT_NE(sim::format_simulation(zero3).find("data parallel: 4 workers, ZeRO stage 3"),
            std::string::npos);
  EXPECT_EQ(sim::to_json(zero3)["data_parallel"]["zero"], 3);
}

TEST(Simulate, MappingEfficiencySlowsTheComputeBoundGemm) {
  const StepCost c = one_linear(10, 5, 6);  // the hand example's forward GEMM
  const auto p = accelerator(1, 1e9, 4, 4);
  const auto s = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  const auto& fwd = s.layers[0].phases[0];
  ASSERT_TRUE(fwd.mapping);
  EXPECT_DOUBLE_EQ(fwd.mapping->utilization, 300.0 / (16 * 80));
  EXPECT_NEAR(fwd.compute_s, 600 / (1e12 * fwd.mapping->utilization) + (fwd.flops - 600) / 1e12,
              1e-18);
  // dX is (M x K) = (M x N)(N x K): 10 x 5 from K'=6.
  const auto& dx = s.layers[0].phases[1];
  ASSERT_TRUE(dx.mapping);
  EXPECT_EQ(dx.mapping->folds, 2 * 2);  // ceil(6/4) rows x ceil(5/4) columns
}

// A format runs at its own peak or its class's (8-bit floats on fp8); a peak the description
// does not state is refused, unless it says what the hardware runs the format as.
TEST(Simulate, AFormatWithoutAPeakIsRefusedUnlessTheDescriptionSaysWhatItRunsAs) {
  PlatformDescription p = accelerator(1, 1);
  p.peak_tflops = {{"bf16", 100}, {"fp8", 200}};
  EXPECT_EQ(sim::resolve_format(p, "e4m3").peak_dtype, "fp8");
  EXPECT_TRUE(sim::resolve_format(p, "e4m3").note.empty());
  EXPECT_EQ(sim::resolve_format(p, "e3m4").peak_dtype, "fp8");
  // Every peak key is a format name too: fp4 as fp8 is, 4 bits at the fp4 peak.
  p.peak_tflops["fp4"] = 400;
  EXPECT_EQ(sim::resolve_format(p, "fp4").peak_dtype, "fp4");
  EXPECT_EQ(sim::resolve_format(p, "fp4").bits, 4);
  p.peak_tflops.erase("fp4");
  try {
    sim::resolve_format(p, "fp32");
    ADD_FAILURE() << "fp32 without a peak was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "platform 'test-accel' states no fp32 peak (it states bf16, fp8), nor what it runs "
              "fp32 as (runs_as)");
  }
  EXPECT_THROW(sim::resolve_format(p, "int8"), UsageError);
  p.runs_as = {{"fp32", "bf16"}};
  const auto f = sim::resolve_format(p, "fp32");
  EXPECT_EQ(f.peak_dtype, "bf16");
  EXPECT_NE(f.note.find("runs fp32 as bf16"), std::string::npos) << f.note;
  EXPECT_THROW(sim::resolve_format(p, "fp7x"), UsageError);
  // The shipped V100 states fp16 and no bf16: bf16 is refused, not quietly run as fp16.
  EXPECT_THROW(sim::resolve_format(find_platform("v100-sxm2-16gb"), "bf16"), UsageError);
  EXPECT_EQ(sim::resolve_format(find_platform("tpu-v2-board"), "fp32").peak_dtype, "bf16");
}

// Mixed precision as frameworks run it: under AMP the matrix products take the half format's
// tensor-core peak and activations its width, the rest runs at fp32; tf32 changes only the
// matrix products' peak.
TEST(Simulate, MixedPrecisionRecipesRunMatrixProductsAndTheRestAtTheirOwnPeaks) {
  PlatformDescription p = accelerator(1, 1e6);  // compute-bound
  p.peak_tflops = {{"fp32", 10}, {"tf32", 80}, {"fp16", 160}, {"bf16", 160}};
  const Config c = parse_config("fc:layers=2,nodes=1024,input=1024,output=10,batch=256");
  const auto fp32 = sim::simulate_config(p, c, "fp32");
  const auto amp = sim::simulate_config(p, c, "amp-fp16");
  const auto tf32 = sim::simulate_config(p, c, "tf32");
  EXPECT_TRUE(amp.format.mixed);
  EXPECT_EQ(amp.format.peak_dtype, "fp16");
  EXPECT_EQ(amp.format.other_peak_dtype, "fp32");
  EXPECT_EQ(amp.format.bits, 16);
  EXPECT_EQ(amp.format.state_bits, 32);
  for (size_t i = 0; i < fp32.layers.size(); ++i)
    for (size_t k = 0; k < fp32.layers[i].phases.size(); ++k) {
      const auto &a = fp32.layers[i].phases[k], &b = amp.layers[i].phases[k],
                 &t = tf32.layers[i].phases[k];
      const double expect = b.matmul_flops / 160e12 + (b.flops - b.matmul_flops) / 10e12;
      EXPECT_NEAR(b.compute_s, expect, 1e-9 * expect) << fp32.layers[i].name;
      const double expect_tf32 = t.matmul_flops / 80e12 + (t.flops - t.matmul_flops) / 10e12;
      EXPECT_NEAR(t.compute_s, expect_tf32, 1e-9 * expect_tf32);
      // Autocast runs softmax and cross-entropy in fp32, its logits cast up and their
      // gradient down, 2 + 4 bytes each way, shared by the loss's two phases (the next test
      // has the rest).
      if (fp32.layers[i].op == "softmax_xent")
        EXPECT_DOUBLE_EQ(b.bytes, a.bytes + 2.0 * 256 * 10 * (2 + 4) / 2);
      else if (fp32.layers[i].name != "optimizer")
        EXPECT_DOUBLE_EQ(b.bytes, a.bytes / 2);
    }
  // The optimizer keeps fp32 and adds the weights' cast to fp16.
  const StepCost cost = step_cost(c);
  EXPECT_DOUBLE_EQ(amp.layers.back().phases[0].bytes, cost.opt_bytes + 6.0 * double(cost.params));
  const double state = cost.memory.weights + cost.memory.gradients + cost.memory.optimizer_state;
  // The loss's saved log-probabilities stay fp32 under autocast.
  const double loss_saved = cost.layers.back().saved_bytes;
  ASSERT_EQ(cost.layers.back().op, "softmax_xent");
  EXPECT_DOUBLE_EQ(amp.memory_bytes, state +
                                         (cost.memory.total() - cost.memory.inputs - state) / 2 +
                                         cost.memory.inputs + loss_saved / 2);
  EXPECT_THROW(sim::simulate_config(find_platform("v100-sxm2-16gb"), c, "amp-bf16"), UsageError);
  EXPECT_EQ(sim::simulate_config(find_platform("v100-sxm2-16gb"), c, "amp-fp16").format.peak_dtype,
            "fp16");
}

// Autocast's fp32 ops (softmax, cross-entropy, layer and RMS norms) keep their bytes at 4 per
// element under amp-*, plus the casts around them, and an attention layer keeps its score
// passes (LayerCost::fp32_bytes) there while its Q, K, V and output move in the half format.
// On this GPU the loss moves its eager passes (LayerCost::gpu_pass_bytes).
TEST(Simulate, AutocastKeepsNormsSoftmaxAndAttentionScoresInFp32) {
  const PlatformDescription p = find_platform("h100-sxm5-80gb");
  const Config c =
      parse_config("gpt:layers=2,d_model=128,heads=4,seq=256,vocab=1000,batch=4,dtype=fp32");
  const StepCost cost = step_cost(c);
  const auto fp32 = sim::simulate_config(p, c, "fp32");
  const auto amp = sim::simulate_config(p, c, "amp-bf16");
  int attention = 0, norms = 0;
  for (size_t i = 0; i < cost.layers.size(); ++i) {
    const LayerCost& l = cost.layers[i];
    const double all = l.gpu_pass_bytes > 0 ? l.gpu_pass_bytes : l.bytes_read + l.bytes_written;
    EXPECT_EQ(l.gpu_pass_bytes > 0, l.op == "softmax_xent") << l.name;
    double a = 0, b = 0;
    for (const auto& ph : fp32.layers[i].phases) a += ph.bytes;
    for (const auto& ph : amp.layers[i].phases) b += ph.bytes;
    EXPECT_NEAR(a, all, 1e-9 * all) << l.name;
    if (l.op == "layernorm" || l.op == "softmax_xent") {
      ++norms;
      const double casts = 2 * (l.output_bytes / 4) * (2 + 4);
      EXPECT_NEAR(b, all + casts, 1e-9 * all) << l.name;
    } else if (l.op == "attention") {
      ++attention;
      ASSERT_GT(l.fp32_bytes, 0.5 * all) << "the scores dominate at seq 256";
      EXPECT_NEAR(b, l.fp32_bytes + (all - l.fp32_bytes) / 2, 1e-9 * all) << l.name;
    } else if (l.op == "linear") {
      EXPECT_NEAR(b, all / 2, 1e-9 * all) << l.name;
    }
  }
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(norms, 2 * 2 + 1 + 1);  // two per block, the final norm, the loss
  // Memory: autocast saves the fp32 ops' tensors at 4 bytes, and the attention's
  // probabilities twice, in fp32 for softmax's backward and in bf16 for P V's.
  const MemoryEstimate& m = cost.memory;
  const double state = m.weights + m.gradients + m.optimizer_state;
  double expect = state + (m.total() - m.inputs - state) / 2 + m.inputs;
  for (const LayerCost& l : cost.layers)
    if (l.op == "layernorm" || l.op == "softmax_xent")
      expect += l.saved_bytes / 2;
    else if (l.op == "attention")
      expect += l.fp32_saved_bytes;  // fp32 at 4 (half counted) + the bf16 copy at 2
  EXPECT_NEAR(amp.memory_bytes, expect, 1e-9 * expect);
  EXPECT_GT(amp.memory_bytes, fp32.memory_bytes / 2);
  // tf32 is no autocast: every byte at 4.
  const auto tf32 = sim::simulate_config(p, c, "tf32");
  for (size_t i = 0; i < cost.layers.size(); ++i)
    for (size_t k = 0; k < tf32.layers[i].phases.size(); ++k)
      EXPECT_DOUBLE_EQ(tf32.layers[i].phases[k].bytes, fp32.layers[i].phases[k].bytes);
}

// The eager optimizers' passes: on a GPU description the update is multi-tensor (every pass
// sweeps all parameters from memory), on a CPU one a loop over parameters whose later passes
// find one tensor in cache.
TEST(Simulate, OptimizerMovesEveryPassOnAGpuAndEachTensorOnceOnACpu) {
  const Config c = parse_config("fc:layers=2,nodes=1024,input=1024,output=10,batch=256");
  const StepCost cost = step_cost(c);
  // rmsprop: p, g, v, m read and p, v, m written once; 11 reads and 7 writes over 7 passes.
  EXPECT_DOUBLE_EQ(cost.opt_bytes, 4.0 * (4 + 3) * double(cost.params));
  EXPECT_DOUBLE_EQ(cost.opt_pass_bytes, 4.0 * (11 + 7) * double(cost.params));
  PlatformDescription gpu = find_platform("h100-sxm5-80gb");
  const auto g = sim::simulate_config(gpu, c, "fp32");
  EXPECT_DOUBLE_EQ(g.layers.back().phases[0].bytes, cost.opt_pass_bytes);
  PlatformDescription cpu = accelerator(1, 100);
  cpu.kind = "cpu";
  const auto h = sim::simulate_config(cpu, c, "fp32");
  EXPECT_DOUBLE_EQ(h.layers.back().phases[0].bytes, cost.opt_bytes);
  for (const std::string opt : {"sgd", "momentum", "adam", "adamw"}) {
    const StepCost o = step_cost(parse_config("fc:layers=2,nodes=64,optimizer=" + opt));
    EXPECT_GE(o.opt_pass_bytes, o.opt_bytes) << opt;
  }
}

TEST(Simulate, CapacityExceededIsOomPredicted) {
  PlatformDescription p = accelerator(1, 100);
  const Config c = parse_config("fc:layers=4,nodes=4096,batch=64");
  EXPECT_EQ(sim::simulate_config(p, c).status, "ok");
  p.memory_gb = 0.01;
  EXPECT_EQ(sim::simulate_config(p, c).status, "oom-predicted");
}

TEST(Simulate, EveryFamilyWithACostDescriptionSimulates) {
  const PlatformDescription p = accelerator(100, 1000, 128, 128);
  for (const char* text :
       {"fc:layers=2,nodes=256,batch=32", "cnn:block=residual,filters=8,image=32,output=10,batch=4",
        "rnn:cell=lstm,embed=64,length=8,vocab=256,batch=8"}) {
    const auto s = sim::simulate_config(p, parse_config(text));
    EXPECT_GT(s.step_s, 0) << text;
    double sum = 0;
    for (const auto& [ph, t] : s.phase_s) sum += t;
    EXPECT_NEAR(sum, s.step_s, 1e-12 * s.step_s) << text;
    EXPECT_NEAR(s.compute_bound_s + s.memory_bound_s, s.step_s, 1e-12 * s.step_s) << text;
  }
}

TEST(Simulate, ANumericsConfigIsSimulatedInItsPolicysComputeFormat) {
  PlatformDescription p = accelerator(1, 1);
  p.peak_tflops["fp8"] = 2;
  const std::string fc = "fc:layers=2,nodes=256,batch=32";
  EXPECT_EQ(sim::simulate_config(p, parse_config(fc)).format.name, "fp32");
  const auto q = sim::simulate_config(p, parse_config(fc + ",numerics=w:e4m3+a:e4m3+e:e5m2"));
  EXPECT_EQ(q.format.name, "e4m3");
  EXPECT_DOUBLE_EQ(q.format.bits, 8);
  // --format wins; a policy that leaves activations in float32 keeps the dtype.
  EXPECT_EQ(sim::simulate_config(p, parse_config(fc + ",numerics=w:e4m3+a:e4m3+e:e5m2"), "bf16")
                .format.name,
            "bf16");
  EXPECT_EQ(sim::simulate_config(p, parse_config(fc + ",numerics=w:e4m3+g:e5m2")).format.name,
            "fp32");
}

PlatformDescription::Efficiency curve(std::vector<PlatformDescription::GemmPoint> fp32,
                                      double op_overhead_us = 0) {
  PlatformDescription::Efficiency e;
  e.op_overhead_us = op_overhead_us;
  if (!fp32.empty()) e.gemm["fp32"] = std::move(fp32);
  return e;
}

TEST(Efficiency, GemmFractionIsLogLogInterpolatedAndClampedAtTheEnds) {
  PlatformDescription p = accelerator(1, 1);
  EXPECT_DOUBLE_EQ(p.gemm_fraction("fp32", 100), 1);  // no efficiency: the pure roofline
  p.efficiency = curve({{16, 0.01}, {256, 0.64}, {1024, 0.8}});
  // 64 is halfway from 16 to 256 in log n, so the fraction is the geometric mean.
  EXPECT_NEAR(p.gemm_fraction("fp32", 64), std::sqrt(0.01 * 0.64), 1e-12);
  EXPECT_NEAR(p.gemm_fraction("fp32", 512), std::sqrt(0.64 * 0.8), 1e-12);
  EXPECT_DOUBLE_EQ(p.gemm_fraction("fp32", 256), 0.64);
  EXPECT_DOUBLE_EQ(p.gemm_fraction("fp32", 2), 0.01);
  EXPECT_DOUBLE_EQ(p.gemm_fraction("fp32", 1e6), 0.8);
  EXPECT_DOUBLE_EQ(p.gemm_fraction("bf16", 64), 1);  // no bf16 curve stated
}

TEST(Efficiency, EquivalentSquareSizeMatchesIntensity) {
  EXPECT_DOUBLE_EQ(sim::equivalent_square_n(64, 64, 64), 64);
  // A thin im2col GEMM (a 3x3 convolution of 8 channels on 32x32 images, batch 16) has the
  // intensity of a 21.6-square GEMM, though its FLOPs are those of a 211-square one.
  const double n = sim::equivalent_square_n(16384, 8, 72);
  EXPECT_NEAR(n, 3.0 * 16384 * 8 * 72 / (16384 * 72 + 72 * 8 + 16384 * 8), 1e-9);
  EXPECT_LT(n, 22);
  EXPECT_GT(std::cbrt(16384.0 * 8 * 72), 211);
}

TEST(Efficiency, TheCurveSlowsEachGemmPhaseByItsFraction) {
  const StepCost c = one_linear(256, 256, 256);  // square: n = 256 in all three phases
  PlatformDescription p = accelerator(1, 1e9);   // compute-bound
  const auto f = sim::resolve_format(p, "fp32");
  const auto a = sim::simulate_step(p, c, 4, f);
  p.efficiency = curve({{16, 0.1}, {4096, 0.4}});
  const double frac = p.gemm_fraction("fp32", 256);
  EXPECT_NEAR(frac, 0.1 * std::pow(4.0, 0.5), 1e-12);  // 256 is halfway in log n
  const auto b = sim::simulate_step(p, c, 4, f);
  ASSERT_EQ(b.layers[0].phases.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto &pa = a.layers[0].phases[i], &pb = b.layers[0].phases[i];
    EXPECT_DOUBLE_EQ(pb.gemm_fraction, frac) << pb.phase;
    const double other = (pa.flops - pa.matmul_flops) / 1e12;
    EXPECT_NEAR(pb.compute_s, pa.matmul_flops / (1e12 * frac) + other, 1e-15) << pb.phase;
  }
  EXPECT_DOUBLE_EQ(b.overhead_s, 0);  // op_overhead_us 0: nothing added
}

// A thin product (a batch of rows against a wide layer) reads the batch-row curves: its smallest
// dimension picks the row counts around it, the harmonic mean of the other two is read along
// each; past the largest row count it heads for the square curve; without rows for the dtype,
// the square curve at the equivalent n, as before.
TEST(Efficiency, ThinGemmsReadTheBatchRowCurvesBetweenTheirRowCounts) {
  PlatformDescription p = accelerator(1, 1e9);
  p.efficiency = curve({{64, 0.2}, {4096, 0.8}});
  p.efficiency->gemm_rows["fp32"] = {
      {64, 256, 0.4}, {64, 1024, 0.6}, {16, 256, 0.1}, {16, 1024, 0.2}};
  std::sort(
      p.efficiency->gemm_rows["fp32"].begin(), p.efficiency->gemm_rows["fp32"].end(),
      [](const auto& a, const auto& b) { return a.rows != b.rows ? a.rows < b.rows : a.n < b.n; });
  // On a measured point; the dimensions' order does not matter.
  EXPECT_DOUBLE_EQ(p.gemm_shape_fraction("fp32", 64, 256, 256), 0.4);
  EXPECT_DOUBLE_EQ(p.gemm_shape_fraction("fp32", 256, 64, 256), 0.4);
  // L = 512, halfway along each row in log n; 32 rows halfway between 16 and 64 in log rows.
  const double r16 = std::sqrt(0.1 * 0.2), r64 = std::sqrt(0.4 * 0.6);
  EXPECT_NEAR(p.gemm_shape_fraction("fp32", 32, 512, 512), std::sqrt(r16 * r64), 1e-12);
  // L is the harmonic mean of the two larger: 2 x 2048 x 341.3 / (2048 + 341.3) = 585.1.
  const double L = 2 * 2048 * (1024.0 / 3) / (2048 + 1024.0 / 3);
  const double t = std::log(L / 256) / std::log(4.0);
  EXPECT_NEAR(p.gemm_shape_fraction("fp32", 64, 2048, 1024.0 / 3),
              std::exp(std::log(0.4) + t * (std::log(0.6) - std::log(0.4))), 1e-12);
  // Below the fewest rows: clamped to them.
  EXPECT_DOUBLE_EQ(p.gemm_shape_fraction("fp32", 4, 256, 256), 0.1);
  // Above the most rows: log-log toward the square curve at L, reached where s = L.
  const double sq = p.gemm_fraction("fp32", 1024);
  EXPECT_NEAR(p.gemm_shape_fraction("fp32", 1024, 1024, 1024), sq, 1e-12);
  EXPECT_NEAR(p.gemm_shape_fraction("fp32", 256, 1024, 1024),
              std::exp(std::log(0.6) + 0.5 * (std::log(sq) - std::log(0.6))), 1e-12);
  // A product smaller than every measured n: the square curve's small end where it is lower.
  p.efficiency->gemm["fp32"] = {{16, 0.01}, {4096, 0.8}};
  EXPECT_DOUBLE_EQ(p.gemm_shape_fraction("fp32", 16, 32, 32),
                   p.gemm_fraction("fp32", sim::equivalent_square_n(16, 32, 32)));
  p.efficiency->gemm["fp32"] = {{64, 0.2}, {4096, 0.8}};
  // One row count: below and above it as before; with no square curve for the dtype, past
  // it the row count's own figure.
  PlatformDescription one = accelerator(1, 1e9);
  one.efficiency.emplace();
  one.efficiency->gemm_rows["fp32"] = {{64, 256, 0.4}, {64, 1024, 0.6}};
  EXPECT_DOUBLE_EQ(one.gemm_shape_fraction("fp32", 16, 256, 256), 0.4);
  EXPECT_DOUBLE_EQ(one.gemm_shape_fraction("fp32", 512, 1024, 1024), 0.6);
  // No rows for bf16, no efficiency at all: the square curve at the equivalent n, or 1.
  p.efficiency->gemm["bf16"] = {{64, 0.3}, {1024, 0.9}};
  EXPECT_DOUBLE_EQ(p.gemm_shape_fraction("bf16", 64, 512, 512),
                   p.gemm_fraction("bf16", sim::equivalent_square_n(64, 512, 512)));
  EXPECT_DOUBLE_EQ(accelerator(1, 1).gemm_shape_fraction("fp32", 64, 512, 512), 1);
  // A linear layer's three phases all run at its shape's fraction.
  const StepCost c = one_linear(64, 512, 512);
  const auto f = sim::resolve_format(p, "fp32");
  const auto s = sim::simulate_step(p, c, 4, f);
  for (const auto& ph : s.layers[0].phases)
    if (ph.matmul_flops > 0)
      EXPECT_DOUBLE_EQ(ph.gemm_fraction, p.gemm_shape_fraction("fp32", 64, 512, 512)) << ph.phase;
}

// A dense convolution reads the rows table measured on the run's threads at its output rows
// and n = sqrt(N K / 9) (a 3x3 convolution's channels), log-log between the points and clamped
// at the edges; a grouped convolution, and a dtype without the table, keep the curve.
TEST(Efficiency, DenseConvolutionsReadTheRowsTableAtTheirOutputRowsAndChannels) {
  PlatformDescription p = accelerator(1, 1e9);
  p.efficiency = curve({{64, 0.2}, {4096, 0.8}});
  p.efficiency->conv["fp32"] = {{22, 0.5}, {336, 0.95}};
  p.efficiency->conv_rows["fp32"] = {{32, 64, 0.2}, {32, 256, 0.4}, {512, 64, 0.8}, {512, 256, 1}};
  sort_by_rows(p.efficiency->conv_rows["fp32"]);
  // 3x3, C = K = 64 on 32 output rows: a measured point; a 1x1 with the same N K / 9 too.
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 32, 64, 9 * 64), 0.2);
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 32, 192, 192), 0.2);
  // n = 128 halfway along each row in log n; 128 rows halfway between 32 and 512 in log rows.
  const double r32 = std::sqrt(0.2 * 0.4), r512 = std::sqrt(0.8 * 1.0);
  EXPECT_NEAR(p.conv_shape_fraction("fp32", 128, 128, 9 * 128), std::sqrt(r32 * r512), 1e-12);
  // Clamped: fewer rows, fewer channels than measured.
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 8, 64, 9 * 64), 0.2);
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 512, 8, 9 * 8), 0.8);
  // Past the table (more rows than its largest row count, more channels than measured around
  // the rows): the higher of its edge and the curve at the equivalent square n.
  const auto curve_at = [&](double m, double n, double k) {
    return p.conv_fraction("fp32", sim::equivalent_square_n(m, n, k));
  };
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 8192, 64, 9 * 64),
                   std::max(0.8, curve_at(8192, 64, 9 * 64)));
  EXPECT_GT(curve_at(8192, 64, 9 * 64), 0.8);  // the curve is the higher there
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("fp32", 8192, 256, 9 * 256), 1);
  // A row count measured only to 64 channels: 128 channels at its rows are past it, where its
  // neighbour's 128 (here interpolated along n) is not.
  PlatformDescription cut = p;
  cut.efficiency->conv_rows["fp32"] = {
      {32, 64, 0.2}, {32, 256, 0.4}, {512, 64, 0.3}, {2048, 64, 0.35}, {2048, 256, 0.45}};
  EXPECT_DOUBLE_EQ(cut.conv_shape_fraction("fp32", 512, 128, 9 * 128),
                   std::max(0.3, curve_at(512, 128, 9 * 128)));
  EXPECT_NEAR(cut.conv_shape_fraction("fp32", 2048, 128, 9 * 128), std::sqrt(0.35 * 0.45), 1e-12);
  // No table for the dtype: the curve at the im2col GEMM's equivalent square n.
  p.efficiency->conv["bf16"] = {{22, 0.3}, {336, 0.9}};
  EXPECT_DOUBLE_EQ(p.conv_shape_fraction("bf16", 128, 64, 576),
                   p.conv_fraction("bf16", sim::equivalent_square_n(128, 64, 576)));
  // In a step: a dense convolution's phases at the table's fraction, a depthwise one's at the
  // curve's.
  // Batch 8 on 4x4 maps: 128 output rows.
  StepCost c;
  c.layers.push_back(cost::conv2d("conv", {8, 128, 4, 4, 128, 3, 1}, 4, true));
  c.layers.push_back(cost::conv("dw", {8, 128, 4, 4, 128, 3, 3, 1, 1, 1, 1, 128, false}, 4, true));
  ASSERT_EQ(c.layers[0].op, "conv2d");
  ASSERT_EQ(c.layers[1].op, "gconv2d");
  ASSERT_EQ(c.layers[0].gemm_m, 128);
  const auto s = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  for (const auto& ph : s.layers[0].phases)
    EXPECT_DOUBLE_EQ(ph.gemm_fraction, p.conv_shape_fraction("fp32", 128, 128, 9 * 128))
        << ph.phase;
  for (const auto& ph : s.layers[1].phases)
    if (ph.matmul_flops > 0)
      EXPECT_DOUBLE_EQ(ph.gemm_fraction,
                       p.conv_fraction("fp32", sim::equivalent_square_n(128, 1, 9)))
          << ph.phase;
  ASSERT_FALSE(s.layers[0].phases.empty());
  // The table is the whole machine's: a run on half the cores keeps the curve (and half the
  // peak).
  sim::SimOptions half;
  half.peak_share = 0.5;
  const auto h = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"), half);
  for (const auto& ph : h.layers[0].phases)
    EXPECT_DOUBLE_EQ(ph.gemm_fraction,
                     p.conv_fraction("fp32", sim::equivalent_square_n(128, 128, 9 * 128)))
        << ph.phase;
}

// Wave quantization, by hand: 108 units and 128 x 256 tiles. A 1024 x 1024 output is 8 x 4 =
// 32 tiles, one wave on 108 units (32/108 busy) when k is too shallow to split; with k = 4096
// a library splits k in 16 (512 tiles, 5 waves: 512/540). Two tiles on the menu: the one that
// keeps more busy wins.
TEST(Efficiency, WaveUtilizationCountsTilesWavesAndSplitK) {
  PlatformDescription p = accelerator(1, 1);
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1024, 1024, 64), 1);  // no tiles stated
  p.cores = 108;
  p.efficiency = curve({});
  p.efficiency->gemm_tiles["fp32"] = {{128, 256}};
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1024, 1024, 64), 32.0 / 108);
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1024, 1024, 4096), 512.0 / 540);
  // 3 independent GEMMs (count) share the waves: 96 tiles, one wave.
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1024, 1024, 64, 3), 96.0 / 108);
  // A ragged edge: 1000 x 1000 on 128 x 256 tiles still takes 8 x 4 tiles.
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1000, 1000, 64), 1e6 / (108.0 * 128 * 256));
  p.efficiency->gemm_tiles["fp32"] = {{128, 256}, {64, 64}};  // 256 tiles of 64 x 64: 3 waves
  EXPECT_DOUBLE_EQ(p.wave_utilization("fp32", 1024, 1024, 64), 256.0 / 324);
  EXPECT_DOUBLE_EQ(p.wave_utilization("bf16", 1024, 1024, 64), 1);  // no tiles for bf16
  // The simulator multiplies each GEMM phase's curve fraction by its output's utilization.
  p.efficiency->gemm["fp32"] = {{16, 0.5}, {4096, 0.5}};
  const StepCost c = one_linear(1024, 64, 1024);  // forward output 1024 x 1024 over k = 64
  const auto s = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  ASSERT_EQ(s.layers[0].phases.size(), 3u);
  EXPECT_DOUBLE_EQ(s.layers[0].phases[0].gemm_fraction, 0.5 * (256.0 / 324));
  // dX is 1024 x 64 over k = 1024 and dW 64 x 1024 over k = 1024.
  EXPECT_DOUBLE_EQ(s.layers[0].phases[1].gemm_fraction,
                   0.5 * p.wave_utilization("fp32", 1024, 64, 1024));
  EXPECT_DOUBLE_EQ(s.layers[0].phases[2].gemm_fraction,
                   0.5 * p.wave_utilization("fp32", 64, 1024, 1024));
  // A recurrent layer's time steps wait for each other: only its weight gradient shares the
  // waves among them.
  const StepCost r = step_cost(parse_config("rnn:cell=lstm,layers=1,embed=64,length=20,batch=8"));
  const auto rs = sim::simulate_step(p, r, 4, sim::resolve_format(p, "fp32"));
  bool seen = false;
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& l = r.layers[i];
    if (l.op != "lstm") continue;
    seen = true;
    ASSERT_GT(l.gemm_count, 1);
    const auto& ph = rs.layers[i].phases;
    EXPECT_DOUBLE_EQ(ph.front().gemm_fraction,
                     0.5 * p.wave_utilization("fp32", l.gemm_m, l.gemm_n, l.gemm_k, 1));
    EXPECT_DOUBLE_EQ(ph.back().gemm_fraction,
                     0.5 * p.wave_utilization("fp32", l.gemm_k, l.gemm_n, l.gemm_m, l.gemm_count));
  }
  EXPECT_TRUE(seen);
}

TEST(Efficiency, ConvolutionsUseTheirOwnCurveAndOtherGemmsTheGemmOne) {
  StepCost c = one_linear(256, 256, 256);
  c.layers.push_back(cost::conv2d("conv", {16, 8, 32, 32, 8, 3, 1}, 4, true));
  PlatformDescription p = accelerator(1, 1e9);  // compute-bound
  p.efficiency = curve({{16, 0.5}, {4096, 0.5}});
  const auto f = sim::resolve_format(p, "fp32");
  const double n =
      sim::equivalent_square_n(c.layers[1].gemm_m, c.layers[1].gemm_n, c.layers[1].gemm_k);
  // No conv curve: convolutions run at the GEMM curve's fraction.
  EXPECT_DOUBLE_EQ(p.conv_fraction("fp32", n), 0.5);
  const auto a = sim::simulate_step(p, c, 4, f);
  p.efficiency->conv["fp32"] = {{16, 0.05}, {4096, 0.05}};
  EXPECT_DOUBLE_EQ(p.conv_fraction("fp32", n), 0.05);
  EXPECT_DOUBLE_EQ(p.conv_fraction("bf16", n), 1);  // neither curve for bf16
  const auto b = sim::simulate_step(p, c, 4, f);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(b.layers[0].phases[i].gemm_fraction, 0.5);  // the linear layer
    EXPECT_DOUBLE_EQ(b.layers[0].phases[i].compute_s, a.layers[0].phases[i].compute_s);
  }
  for (const auto& ph : b.layers[1].phases) {
    EXPECT_DOUBLE_EQ(ph.gemm_fraction, 0.05) << ph.phase;
    EXPECT_NEAR(ph.compute_s, ph.matmul_flops / (1e12 * 0.05) + (ph.flops - ph.matmul_flops) / 1e12,
                1e-15)
        << ph.phase;
  }
}

TEST(Efficiency, ElementwiseLayersTakeAtLeastTheirMeasuredTimePerElement) {
  StepCost c;
  c.layers.push_back(cost::batchnorm("bn", 32, 16, 256, 4));  // 131072 elements
  c.layers.push_back(cost::maxpool("pool", 32, 16, 256, 64, 3, 4));
  c.layers.push_back(cost::vision::dropout("drop", 131072, 4));  // no rate stated
  PlatformDescription p = accelerator(1, 1000);                  // fast memory: roofline ~0
  const auto f = sim::resolve_format(p, "fp32");
  const auto a = sim::simulate_step(p, c, 4, f);
  p.efficiency = curve({});
  p.efficiency->op_ns_per_element = {{"batchnorm", 3.0}, {"maxpool", 7.5}};
  const auto b = sim::simulate_step(p, c, 4, f);
  auto layer_s = [](const sim::LayerTime& l) { return l.time_s(); };
  EXPECT_NEAR(layer_s(b.layers[0]), 131072 * 3.0e-9, 1e-12);  // per input element
  EXPECT_NEAR(layer_s(b.layers[1]), 32.0 * 16 * 256 * 7.5e-9, 1e-12);
  EXPECT_DOUBLE_EQ(layer_s(b.layers[2]), layer_s(a.layers[2]));  // dropout: the roofline
  for (const auto& ph : b.layers[0].phases) EXPECT_TRUE(ph.memory_bound()) << ph.phase;
  // Slower memory than the stated rate: the roofline stands.
  PlatformDescription slow = accelerator(1, 1e-3);
  slow.efficiency = p.efficiency;
  const auto r = sim::simulate_step(slow, c, 4, f);
  EXPECT_GT(layer_s(r.layers[0]), 131072 * 3.0e-9 * 100);
}

TEST(Efficiency, OverheadAddsOperatorsTimesTheStatedCost) {
  // One linear layer by hand: 1 forward operator, dX and dW, weight and bias accumulated
  // (2), zeroed and updated once each (SGD: 2 FLOPs per parameter, one update).
  StepCost c = one_linear(64, 32, 16);
  c.params = c.layers[0].params;
  c.opt_flops = 2.0 * c.params;
  const auto ops = sim::count_operators(c);
  EXPECT_DOUBLE_EQ(ops.forward, 1);
  EXPECT_DOUBLE_EQ(ops.backward, 2 + 2);
  EXPECT_DOUBLE_EQ(ops.optimizer, 2 * (1 + 1));
  PlatformDescription p = accelerator(1, 100);
  const auto f = sim::resolve_format(p, "fp32");
  const auto a = sim::simulate_step(p, c, 4, f);
  p.efficiency = curve({}, 10);
  const auto b = sim::simulate_step(p, c, 4, f);
  EXPECT_DOUBLE_EQ(b.ops.total(), 9);
  EXPECT_NEAR(b.overhead_s, 9 * 10e-6, 1e-18);
  EXPECT_NEAR(b.step_s - a.step_s, 9 * 10e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b.compute_bound_s, a.compute_bound_s);  // the roofs are untouched
  EXPECT_DOUBLE_EQ(b.memory_bound_s, a.memory_bound_s);
  EXPECT_NEAR(b.compute_bound_s + b.memory_bound_s + b.overhead_s, b.step_s, 1e-15);
}

// The host dispatches the operators while the GPU runs earlier ones: the step is the longer
// of the two, never their sum.
// One linear layer and its SGD update, on a GPU with 10 us per operator: 6 operators there
// (forward, 2 backward, 2 gradient accumulations, one multi-tensor update), 9 on a CPU (an
// update and a zeroing per tensor).
StepCost one_linear_step() {
  StepCost c = one_linear(64, 32, 16);
  c.params = c.layers[0].params;
  c.opt_flops = 2.0 * c.params;
  c.opt_passes = 1;
  return c;
}

PlatformDescription gpu_with_overhead() {
  PlatformDescription p = accelerator(1, 100);
  p.kind = "gpu";
  p.efficiency = curve({}, 10);
  return p;
}

TEST(Efficiency, TheHostsDispatchBoundsTheStepFromBelowWithoutAddingToIt) {
  const StepCost c = one_linear_step();
  PlatformDescription p = gpu_with_overhead();
  const auto f = sim::resolve_format(p, "fp32");
  const auto device = sim::simulate_step(p, c, 4, f);
  EXPECT_DOUBLE_EQ(device.host_s, 0);
  EXPECT_FALSE(device.host_bound);
  EXPECT_DOUBLE_EQ(device.ops.optimizer, 1);
  EXPECT_DOUBLE_EQ(device.ops.total(), 6);
  p.kind = "cpu";
  EXPECT_DOUBLE_EQ(sim::simulate_step(p, c, 4, f).ops.total(), 9);
  p.kind = "gpu";
  p.efficiency->host_op_us = 1;  // 6 us of dispatch, less than the device's 60 us of overhead
  const auto hidden = sim::simulate_step(p, c, 4, f);
  EXPECT_NEAR(hidden.host_s, 6e-6, 1e-18);
  EXPECT_FALSE(hidden.host_bound);
  EXPECT_DOUBLE_EQ(hidden.step_s, device.step_s);
  p.efficiency->host_op_us = 1e4;
  const auto bound = sim::simulate_step(p, c, 4, f);
  EXPECT_TRUE(bound.host_bound);
  EXPECT_NEAR(bound.step_s, 6 * 1e4 * 1e-6, 1e-12);
  EXPECT_NE(sim::format_simulation(bound).find("host-bound"), std::string::npos);
  // The bound line says what fills the rest of the step: the device waiting for the host.
  EXPECT_NE(sim::format_simulation(bound).find("waiting for the host"), std::string::npos)
      << sim::format_simulation(bound);
  EXPECT_EQ(sim::format_simulation(device).find("waiting for the host"), std::string::npos);
  EXPECT_EQ(sim::to_json(bound)["host_bound"], true);
  const auto j = to_json(p);
  EXPECT_DOUBLE_EQ(j["efficiency"]["host_op_us"].get<double>(), 1e4);
  EXPECT_DOUBLE_EQ(parse_platform(j, "h.json").efficiency->host_op_us, 1e4);
}

// A framework's fixed host work per step (the optimizer's Python, the autograd engine) is paid
// once per step on top of the per-operator dispatch.
TEST(Efficiency, TheHostsPerStepCostIsAddedOnceToItsDispatch) {
  const StepCost c = one_linear_step();
  PlatformDescription p = gpu_with_overhead();
  p.efficiency->host_op_us = 2;
  p.efficiency->host_step_us = 1000;
  const auto f = sim::resolve_format(p, "fp32");
  const auto s = sim::simulate_step(p, c, 4, f);
  EXPECT_NEAR(s.host_step_s, 1e-3, 1e-18);
  EXPECT_NEAR(s.host_s, 1e-3 + 6 * 2e-6, 1e-15);
  EXPECT_TRUE(s.host_bound);
  EXPECT_NEAR(s.step_s, s.host_s, 1e-18);
  EXPECT_NE(sim::format_simulation(s).find("1 ms per step + 6 operators x 2 us"), std::string::npos)
      << sim::format_simulation(s);
  const auto j = to_json(p);
  EXPECT_DOUBLE_EQ(j["efficiency"]["host_step_us"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(parse_platform(j, "h.json").efficiency->host_step_us, 1000);
}

// cuBLAS runs a GEMM whose operands' leading dimensions are off 16 bytes on narrower-access
// kernels; a linear layer's features are those dimensions in all three of its GEMMs, its
// rows in none.
TEST(Efficiency, UnalignedLinearFeaturesRunAtTheDescriptionsAlignmentFraction) {
  PlatformDescription p = accelerator(1, 1e6);
  p.kind = "gpu";
  p.efficiency = curve({});
  p.efficiency->gemm_alignment["bf16"] = {{2, 0.2}, {4, 0.4}};
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 50304}), 1);
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 50257}), 0.2);  // odd: 2 bytes
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {50258, 768}), 0.4);  // 4 bytes
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 50260}), 0.4);  // 8: next stated below
  EXPECT_DOUBLE_EQ(p.alignment_fraction("fp32", 32, {768, 50257}), 1);    // no entry: none
  // Thin products (a 1-wide value head) run on other kernels: left out, as are absent dims.
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 1}), 1);
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 0}), 1);
  EXPECT_DOUBLE_EQ(p.alignment_fraction("bf16", 16, {768, 17}), 0.2);
  // Below every stated alignment (a 4-bit format's odd size, half a byte): the smallest stated.
  p.efficiency->gemm_alignment["fp4"] = {{1, 0.3}, {8, 0.9}};
  EXPECT_DOUBLE_EQ(p.alignment_fraction("fp4", 4, {768, 50257}), 0.3);
  EXPECT_DOUBLE_EQ(p.alignment_fraction("fp4", 4, {768, 50256}), 0.9);  // 25128 bytes: 8
  EXPECT_DOUBLE_EQ(p.alignment_fraction("fp4", 4, {768, 50272}), 1);    // 25136 bytes: 16
  p.efficiency->gemm_alignment.erase("fp4");
  const auto f = sim::resolve_format(p, "bf16");
  auto fractions = [&](double rows, int64_t in, int64_t out) {
    std::vector<double> out_f;
    for (const auto& ph : sim::simulate_step(p, one_linear(rows, in, out), 4, f).layers[0].phases)
      if (ph.matmul_flops > 0) out_f.push_back(ph.gemm_fraction);
    return out_f;
  };
  EXPECT_EQ(fractions(256, 512, 1000), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(fractions(257, 512, 1000), (std::vector<double>{1, 1, 1}));  // rows: never leading
  EXPECT_EQ(fractions(256, 512, 1001), (std::vector<double>{0.2, 0.2, 0.2}));
  EXPECT_EQ(fractions(256, 514, 1000), (std::vector<double>{0.4, 0.4, 0.4}));
  // A convolution's channels are cuDNN's to pad (ResNet's 3-channel input): left alone.
  StepCost conv;
  conv.layers.push_back(cost::conv2d("conv1", {8, 3, 224, 224, 64, 7, 2}, 4, false));
  for (const auto& ph : sim::simulate_step(p, conv, 4, f).layers[0].phases)
    if (ph.matmul_flops > 0) EXPECT_DOUBLE_EQ(ph.gemm_fraction, 1);
  const auto j = to_json(p);
  EXPECT_DOUBLE_EQ(j["efficiency"]["gemm_alignment"]["bf16"]["2"].get<double>(), 0.2);
  EXPECT_EQ(parse_platform(j, "h.json").efficiency->gemm_alignment, p.efficiency->gemm_alignment);
}

// Autocast casts each parameter tensor of a GEMM layer to the half format and its gradient
// back, and brackets an op it runs in fp32 with casts of its activations.
// A mixed FP8 recipe is amp-bf16 with the GEMMs of linear layers whose rows and features are
// multiples of 16 at the fp8 peak, those the cost description keeps in the half format left
// out, and each such GEMM's inputs cast by separate kernels. The bytes per element are written
// here from the kernels each implementation runs (docs/numerics.md, "Mixed FP8 recipes"), per
// tensor of width b: Transformer Engine's current scaling reads it for the amax, then its
// cast-transpose reads it again and writes two fp8 copies (2b + 2); delayed scaling drops the
// amax pass (b + 2); PyTorch's eager kernels run abs (2b), amax (b), a 16-bit tensor's copy to
// fp32 (b + 4), the multiply in fp32 (8), the cast (4 + 1) and the transposed copy (1 + 1).
// x is 4 bytes wide for the first layer (the input as loaded) and the linear layers right after
// a norm (autocast runs it in fp32, and its casts go when those layers are all fp8), else 2; W
// is the fp32 master; dY's cast lands in the weight gradient's phase of a layer that computes
// no input gradient. The recipe casts the fp8 layers' weights, so autocast's cast of them to
// bf16 (6 bytes a weight in the optimizer phase; two operators) goes, and the bias's backward
// cast.
TEST(Simulate, AMixedFp8RecipeRunsEligibleLinearGemmsAtTheFp8PeakAndPaysItsCasts) {
  const double m = 256, k = 512, n = 512;
  StepCost c;
  c.layers.push_back(cost::linear("first", m, 512, 512, 4, false));  // no input gradient
  c.layers.push_back(cost::layernorm("norm", m, 512, 4));
  c.layers.push_back(cost::linear("fc", m, 512, 512, 4, true));
  c.layers.push_back(cost::relu("relu", m * 512, 4));
  c.layers.push_back(cost::linear_nobias("nobias", m, 512, 512, 4, true));
  c.layers.push_back(cost::linear("odd", m, 512, 1000, 4, true));  // 1000 % 16 != 0
  c.layers.push_back(cost::linear("head", m, 1000, 512, 4, true));
  c.layers.back().keep_half_in_fp8 = true;
  PlatformDescription p = accelerator(1, 1000);
  p.kind = "gpu";
  p.peak_tflops = {{"fp32", 10}, {"bf16", 160}, {"fp8", 320}};
  p.efficiency = curve({});
  const auto bf16 = sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-bf16"));
  const auto fp8 = sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-fp8@current"));
  EXPECT_EQ(fp8.format.linear_peak_dtype, "fp8");
  EXPECT_EQ(fp8.format.peak_dtype, "bf16");
  EXPECT_EQ(fp8.fp8_layers, 3);
  const double bw = fp8.bandwidth;
  auto cast_s = [&](const sim::LayerTime& l, const std::string& phase) {
    for (const auto& ph : l.phases)
      if (ph.phase == phase) return ph.scale_s;
    return -1.0;
  };
  // first: x at 4 bytes, W at 4 in forward; dY at 2 in backward-weight (no backward-input).
  EXPECT_NEAR(cast_s(fp8.layers[0], "forward"), (m * k * 10 + k * n * 10) / bw, 1e-18);
  EXPECT_NEAR(cast_s(fp8.layers[0], "backward-weight"), m * n * 6 / bw, 1e-18);
  EXPECT_EQ(cast_s(fp8.layers[0], "backward-input"), -1.0);
  // fc: x at 4 bytes (the norm's fp32 output); dY in backward-input.
  EXPECT_NEAR(cast_s(fp8.layers[2], "forward"), (m * k * 10 + k * n * 10) / bw, 1e-18);
  EXPECT_NEAR(cast_s(fp8.layers[2], "backward-input"), m * n * 6 / bw, 1e-18);
  EXPECT_EQ(cast_s(fp8.layers[2], "backward-weight"), 0);
  // nobias: x at 2 bytes (after a relu).
  EXPECT_NEAR(cast_s(fp8.layers[4], "forward"), (m * k * 6 + k * n * 10) / bw, 1e-18);
  EXPECT_NEAR(fp8.fp8_cast_s, (m * k * 26 + k * n * 30 + m * n * 18) / bw, 1e-18);
  for (size_t i : {0, 2, 4})
    for (const auto& ph : fp8.layers[i].phases) {
      const double expect = ph.matmul_flops / 320e12 + (ph.flops - ph.matmul_flops) / 10e12;
      EXPECT_NEAR(ph.compute_s, expect, 1e-9 * expect) << i << " " << ph.phase;
    }
  for (size_t i : {5, 6})  // not eligible: exactly amp-bf16's phases
    for (size_t j = 0; j < fp8.layers[i].phases.size(); ++j)
      EXPECT_DOUBLE_EQ(fp8.layers[i].phases[j].time_s(), bf16.layers[i].phases[j].time_s())
          << c.layers[i].name;
  // The norm's casts around it go; the optimizer's cast of the three fp8 layers' weights goes.
  auto bytes = [](const sim::LayerTime& l) {
    double b = 0;
    for (const auto& ph : l.phases) b += ph.bytes;
    return b;
  };
  EXPECT_NEAR(bytes(bf16.layers[1]) - bytes(fp8.layers[1]), 2 * m * 512 * (2 + 4), 1e-6);
  EXPECT_NEAR(bytes(bf16.layers.back()) - bytes(fp8.layers.back()), 3 * k * n * (4 + 2), 1e-6);
  // Operators: fused current scaling's amax, scale and cast-transpose for x, W and dY of three
  // layers. Autocast's casts, 4 for each of the five GEMM layers in amp-bf16 (2 per parameter
  // tensor, a bias counted whether there is one or not): the fp8 layers' weights' 2 go, and
  // a bias's backward one, leaving 1, 1 and 2.
  EXPECT_DOUBLE_EQ(fp8.ops.fp8_casts, 27);
  EXPECT_DOUBLE_EQ(bf16.ops.casts, 20);
  EXPECT_DOUBLE_EQ(fp8.ops.casts, 1 + 1 + 2 + 4 + 4);

  const auto delayed = sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-fp8@delayed:16"));
  EXPECT_NEAR(delayed.fp8_cast_s, (m * k * (6 + 6 + 4) + k * n * 18 + m * n * 12) / bw, 1e-18);
  EXPECT_DOUBLE_EQ(delayed.ops.fp8_casts, 9);
  const auto eager = sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-fp8-eager@current"));
  const double b16 = 2 * 2 + 2 + (2 + 4) + 8 + 5 + 2, b32 = 2 * 4 + 4 + 8 + 5 + 2;
  EXPECT_NEAR(eager.fp8_cast_s, (m * k * (2 * b32 + b16) + k * n * 3 * b32 + m * n * 3 * b16) / bw,
              1e-18);
  // abs, amax, clamp, reciprocal and multiply (the scale), multiply, cast, transpose,
  // reciprocal; a 16-bit tensor's amax and itself copied to fp32 besides.
  EXPECT_DOUBLE_EQ(eager.ops.fp8_casts, (9 + 9 + 11) + (9 + 9 + 11) + (11 + 9 + 11));
  EXPECT_GT(eager.step_s, fp8.step_s);
  // A family's layers kept in the half format: gpt's MoE router and lm_head. One block of 16
  // experts at capacity 16: qkv, out and the experts' 32 linear layers run in fp8.
  const Config moe = parse_config(
      "gpt:layers=1,d_model=64,heads=4,seq=16,vocab=64,experts=16,top_k=2,capacity=1.0,batch=8");
  const StepCost mc = step_cost(moe);
  EXPECT_EQ(
      sim::simulate_config(find_platform("h200-sxm-141gb"), moe, "amp-fp8@current").fp8_layers, 34);
  int kept = 0;
  for (const auto& l : mc.layers) kept += l.keep_half_in_fp8;
  EXPECT_EQ(kept, 2);

  // Malformed recipes, and a platform with no fp8 peak, are refused naming the format (or
  // the peak it lacks).
  for (const char* bad : {"amp-fp8", "amp-fp8@block:1x32", "amp-fp8-eager@delayed",
                          "amp-fp8@weekly", "amp-fp8x@current", "amp-fp8-eager"}) {
    try {
      sim::resolve_format(p, bad);
      ADD_FAILURE() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  try {
    sim::resolve_format(find_platform("a100-sxm4-80gb"), "amp-fp8@current");
    ADD_FAILURE() << "a100 has no fp8 peak";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no fp8 peak"), std::string::npos) << e.what();
  }
}

TEST(Efficiency, AutocastAddsItsCastsAsOperatorsAndBytes) {
  StepCost c = one_linear(64, 32, 16);
  c.layers.push_back(cost::layernorm("norm", 64, 16, 4));  // parameters, but no GEMM
  c.layers.push_back(cost::softmax_xent("loss", 64, 16, 4));
  PlatformDescription p = accelerator(1, 100);
  p.kind = "gpu";
  p.efficiency = curve({});
  const auto plain = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  const auto amp = sim::simulate_step(p, c, 4, sim::resolve_format(p, "amp-bf16"));
  EXPECT_DOUBLE_EQ(plain.ops.casts, 0);
  EXPECT_DOUBLE_EQ(amp.ops.casts, 4);  // weight and bias, forward and backward
  EXPECT_DOUBLE_EQ(amp.ops.total(), plain.ops.total() + 4);
  auto bytes = [](const sim::LayerTime& l) {
    double b = 0;
    for (const auto& ph : l.phases) b += ph.bytes;
    return b;
  };
  // The loss in fp32 either way; under autocast its 64 x 16 logits are cast up and their
  // gradient down, 2 + 4 bytes each way.
  EXPECT_NEAR(bytes(amp.layers[2]) - bytes(plain.layers[2]), 2.0 * 64 * 16 * 6, 1e-6);
  EXPECT_NEAR(bytes(amp.layers[1]) - bytes(plain.layers[1]), 2.0 * 64 * 16 * 6, 1e-6);
}

// A GPU's eager cross-entropy passes over the whole rows x classes tensor several times
// (PyTorch's CUDA log-softmax and NLL loss); a CPU's row-at-a-time kernels keep the re-reads
// in cache. Beyond 1024 classes a row no longer stays in a warp's registers; up to 48 KiB
// (in fp32, a length that is a multiple of 4) its forward still reads it once from shared
// memory.
TEST(Efficiency, CrossEntropyOnAGpuMovesEveryEagerPass) {
  for (const auto& [classes, passes] :
       {std::pair{1000, 6}, std::pair{4000, 7}, std::pair{4001, 9}, std::pair{50257, 9}}) {
    StepCost c;
    c.layers.push_back(cost::softmax_xent("loss", 64, classes, 4));
    const double e = 64.0 * classes;
    EXPECT_DOUBLE_EQ(c.layers[0].gpu_pass_bytes, passes * 4 * e);
    PlatformDescription p = accelerator(1, 100);
    const auto f = sim::resolve_format(p, "fp32");
    double other = 0, gpu = 0;
    for (const auto& ph : sim::simulate_step(p, c, 4, f).layers[0].phases) other += ph.bytes;
    p.kind = "gpu";
    for (const auto& ph : sim::simulate_step(p, c, 4, f).layers[0].phases) gpu += ph.bytes;
    EXPECT_DOUBLE_EQ(other, c.layers[0].bytes_read + c.layers[0].bytes_written);
    EXPECT_DOUBLE_EQ(gpu, passes * 4 * e);
  }
}

TEST(Efficiency, RecurrentLayersDispatchTheirCellPerTimeStep) {
  StepCost c;
  c.layers.push_back(cost::recurrent("lstm0", "lstm", 8, 16, 32, 32, 4));
  c.layers.push_back(cost::recurrent("rnn0", "rnn", 8, 16, 32, 32, 4));
  const auto ops = sim::count_operators(c);
  EXPECT_DOUBLE_EQ(ops.forward, 16 * 12 + 16 * 3);
  EXPECT_DOUBLE_EQ(ops.backward, 2 * (16 * 12 + 16 * 3) + 2 * 4);
}

TEST(Efficiency, DescriptionsWithoutItPredictExactlyWhatTheyDidBefore) {
  const StepCost c = one_linear(256, 512, 512);
  const auto p = accelerator(1, 30);
  const auto s = sim::simulate_step(p, c, 4, sim::resolve_format(p, "fp32"));
  double sum = 0;
  for (const auto& l : s.layers)
    for (const auto& ph : l.phases) {
      sum += std::max(ph.compute_s, ph.memory_s);
      EXPECT_DOUBLE_EQ(ph.gemm_fraction, 1);
      if (ph.matmul_flops > 0) EXPECT_NEAR(ph.compute_s, ph.flops / 1e12, 1e-18);
    }
  EXPECT_DOUBLE_EQ(s.step_s, sum);
  EXPECT_DOUBLE_EQ(s.overhead_s, 0);
  EXPECT_DOUBLE_EQ(s.ops.total(), 0);
  // The shipped registry states efficiency only where it was derived from kernel measurements:
  // the V100 and its successors and the TITAN Xp, from DeepBench and later tables
  // (scripts/calibrate_gpus.py);
  // every other known platform keeps its roofline.
  for (const auto& known : list_platforms(nullptr)) {
    const bool calibrated = known.name.rfind("v100", 0) == 0 || known.name.rfind("a100", 0) == 0 ||
                            known.name.rfind("h100", 0) == 0 || known.name.rfind("h200", 0) == 0 ||
                            known.name == "titan-xp";
    EXPECT_EQ(bool(known.efficiency), calibrated) << known.name;
    if (known.efficiency) EXPECT_NE(known.source.find("DeepBench"), std::string::npos);
  }
}

nlohmann::json described(const nlohmann::json& efficiency) {
  nlohmann::json j = to_json(accelerator(1, 1));
  j["efficiency"] = efficiency;
  return j;
}

TEST(Efficiency, JsonRoundTripSortsTheCurve) {
  const auto j = described(
      {{"op_overhead_us", 6.5},
       {"gemm",
        {{"fp32",
          {{{"n", 256}, {"fraction_of_peak", 0.7}}, {{"n", 16}, {"fraction_of_peak", 0.02}}}},
         {"bf16", {{{"n", 64}, {"fraction_of_peak", 0.3}}}}}},
       {"conv",
        {{"fp32",
          {{{"n", 86}, {"fraction_of_peak", 0.38}}, {{"n", 22}, {"fraction_of_peak", 0.04}}}}}},
       {"op_ns_per_element", {{"batchnorm", 3.1}, {"relu", 0.9}}},
       {"gemm_tiles", {{"fp32", {{128, 128}, {64, 32}}}}},
       {"gemm_rows",
        {{"fp32",
          {{{"rows", 64}, {"n", 512}, {"fraction_of_peak", 0.6}},
           {{"rows", 16}, {"n", 512}, {"fraction_of_peak", 0.2}}}}}},
       {"conv_rows",
        {{"fp32",
          {{{"rows", 512}, {"n", 64}, {"fraction_of_peak", 0.9}},
           {{"rows", 32}, {"n", 128}, {"fraction_of_peak", 0.35}}}}}}});
  const PlatformDescription p = parse_platform(j, "t.json");
  ASSERT_TRUE(p.efficiency);
  EXPECT_DOUBLE_EQ(p.efficiency->op_overhead_us, 6.5);
  ASSERT_EQ(p.efficiency->gemm.at("fp32").size(), 2u);
  EXPECT_EQ(p.efficiency->gemm.at("fp32")[0].n, 16);
  EXPECT_DOUBLE_EQ(p.efficiency->gemm.at("fp32")[1].fraction_of_peak, 0.7);
  EXPECT_FALSE(p.extra.contains("efficiency"));  // a field of its own, not an extra
  const nlohmann::json again = to_json(p);
  EXPECT_EQ(again["efficiency"]["gemm"]["fp32"][0]["n"], 16);
  ASSERT_EQ(p.efficiency->conv.at("fp32").size(), 2u);
  EXPECT_EQ(again["efficiency"]["conv"]["fp32"][0]["n"], 22);
  EXPECT_DOUBLE_EQ(p.efficiency->op_ns_per_element.at("batchnorm"), 3.1);
  EXPECT_EQ(again["efficiency"]["op_ns_per_element"]["relu"], 0.9);
  ASSERT_EQ(p.efficiency->gemm_tiles.at("fp32").size(), 2u);
  EXPECT_EQ(p.efficiency->gemm_tiles.at("fp32")[1].cols, 32);
  EXPECT_EQ(again["efficiency"]["gemm_tiles"]["fp32"][0][0], 128);
  ASSERT_EQ(p.efficiency->gemm_rows.at("fp32").size(), 2u);
  EXPECT_EQ(p.efficiency->gemm_rows.at("fp32")[0].rows, 16);  // sorted by rows, then n
  EXPECT_EQ(again["efficiency"]["gemm_rows"]["fp32"][1]["rows"], 64);
  ASSERT_EQ(p.efficiency->conv_rows.at("fp32").size(), 2u);
  EXPECT_EQ(p.efficiency->conv_rows.at("fp32")[0].rows, 32);  // sorted by rows, then n
  EXPECT_DOUBLE_EQ(p.efficiency->conv_rows.at("fp32")[0].fraction_of_peak, 0.35);
  EXPECT_EQ(again["efficiency"]["conv_rows"]["fp32"][1]["n"], 64);
  EXPECT_EQ(to_json(parse_platform(again, "again.json")), again);
  // An old description (no efficiency) round-trips without gaining one.
  const auto old = to_json(accelerator(1, 1));
  EXPECT_FALSE(old.contains("efficiency"));
  EXPECT_FALSE(parse_platform(old, "old.json").efficiency);
}

// Streaming kernels reach a share of the stated bandwidth: every memory-bound phase takes
// 1/share as long, and compute-bound phases do not change.
TEST(Efficiency, MemoryFractionSlowsOnlyTheMemoryBoundPhases) {
  const StepCost c = step_cost(parse_config("cnn:block=residual,blocks=1,filters=16,image=32"));
  const auto full = parse_platform(described({{"op_overhead_us", 0}}), "full.json");
  const auto part =
      parse_platform(described({{"op_overhead_us", 0}, {"memory_fraction", 0.8}}), "part.json");
  EXPECT_DOUBLE_EQ(part.efficiency->memory_fraction, 0.8);
  EXPECT_DOUBLE_EQ(to_json(part)["efficiency"]["memory_fraction"], 0.8);
  EXPECT_FALSE(to_json(full)["efficiency"].contains("memory_fraction"));  // 1: not written
  const auto a = sim::simulate_step(full, c, 4, sim::resolve_format(full, "fp32"));
  const auto b = sim::simulate_step(part, c, 4, sim::resolve_format(part, "fp32"));
  ASSERT_EQ(a.layers.size(), b.layers.size());
  size_t memory_bound = 0;
  for (size_t i = 0; i < a.layers.size(); ++i)
    for (size_t j = 0; j < a.layers[i].phases.size(); ++j) {
      const auto &x = a.layers[i].phases[j], &y = b.layers[i].phases[j];
      EXPECT_NEAR(y.memory_s, x.memory_s / 0.8, 1e-15 + 1e-12 * x.memory_s);
      EXPECT_DOUBLE_EQ(y.compute_s, x.compute_s);
      memory_bound += x.memory_bound();
    }
  EXPECT_GT(memory_bound, 0u);
  EXPECT_GT(b.step_s, a.step_s);
}

// A convolution's fixed time: once per convolution phase (forward, dX, dW; the stem has no
// dX), on top of the per-operator overhead, and nothing else changes.
TEST(Efficiency, ConvolutionCallTimeIsAddedPerConvolutionPhase) {
  const StepCost c = step_cost(parse_config("cnn:block=residual,blocks=1,filters=16,image=32"));
  const auto plain = parse_platform(described({{"op_overhead_us", 2}}), "plain.json");
  const auto calls =
      parse_platform(described({{"op_overhead_us", 2}, {"conv_call_us", 30}}), "calls.json");
  EXPECT_DOUBLE_EQ(to_json(calls)["efficiency"]["conv_call_us"], 30);
  EXPECT_FALSE(to_json(plain)["efficiency"].contains("conv_call_us"));
  const auto a = sim::simulate_step(plain, c, 4, sim::resolve_format(plain, "fp32"));
  const auto b = sim::simulate_step(calls, c, 4, sim::resolve_format(calls, "fp32"));
  double phases = 0;
  for (const auto& l : b.layers)
    if (l.op == "conv2d") phases += double(l.phases.size());
  EXPECT_GT(phases, 0);
  EXPECT_DOUBLE_EQ(b.conv_phases, phases);
  EXPECT_NEAR(b.overhead_s, a.overhead_s + phases * 30e-6, 1e-12);
  EXPECT_NEAR(b.step_s, a.step_s + phases * 30e-6, 1e-12);
}

// A layer's measured call time is added once per layer, less what the model counts for the
// same layer elsewhere: the measured layer's elements at op_ns_per_element (shared by its
// phases: one of them forward), and its operators at op_overhead_us (one forward; one per
// gradient and two accumulations for a layer with parameters, backward). A phase cheaper than
// those adds nothing; an op without a time, nothing. The step split by phase sums to the step.
TEST(Efficiency, ALayersMeasuredCallTimeIsAddedBeyondItsElementsAndOperators) {
  StepCost c;
  c.layers.push_back(cost::batchnorm("bn0", 16, 8, 16, 4));  // params, dx and dw
  c.layers.push_back(cost::batchnorm("bn1", 16, 8, 16, 4));
  c.layers.push_back(cost::relu("relu", 2048, 4));  // forward and dx
  c.layers.push_back(cost::add("add", 2048, 4));    // forward only
  ASSERT_GT(c.layers[0].params, 0);
  ASSERT_GT(c.layers[0].bwd_weight_flops, 0);
  ASSERT_GT(c.layers[2].bwd_input_flops, 0);
  ASSERT_EQ(c.layers[3].bwd_input_flops, 0);
  const nlohmann::json base = {{"op_overhead_us", 2}, {"op_ns_per_element", {{"batchnorm", 2.0}}}};
  nlohmann::json with = base;
  with["layer_call_us"] = {{"batchnorm", {{"forward", 14}, {"backward", 16}, {"elements", 2048}}},
                           {"relu", {{"forward", 3}, {"backward", 6}, {"elements", 2048}}},
                           {"add", {{"forward", 1}, {"backward", 1}, {"elements", 2048}}}};
  const auto plain = parse_platform(described(base), "plain.json");
  const auto calls = parse_platform(described(with), "calls.json");
  EXPECT_EQ(to_json(calls)["efficiency"]["layer_call_us"], with["layer_call_us"]);
  EXPECT_FALSE(to_json(plain)["efficiency"].contains("layer_call_us"));
  const auto f = sim::resolve_format(plain, "fp32");
  const auto a = sim::simulate_step(plain, c, 4, f);
  const auto b = sim::simulate_step(calls, c, 4, f);
  ASSERT_EQ(b.layers[0].phases.size(), 3u);
  const double elements_us = 2048 * 2.0e-3;
  const double bn_fwd = 14 - elements_us / 3 - 2, bn_bwd = 16 - elements_us * 2 / 3 - 4 * 2;
  const double relu_fwd = 3 - 2, relu_bwd = 6 - 2;  // no per-element rate stated
  const double add_fwd = 0, add_bwd = 1;            // 1 us < its operator; no backward one
  const double fwd = 2 * bn_fwd + relu_fwd + add_fwd, bwd = 2 * bn_bwd + relu_bwd + add_bwd;
  EXPECT_DOUBLE_EQ(b.layer_calls, 4);
  EXPECT_NEAR(b.layer_calls_s, (fwd + bwd) * 1e-6, 1e-12);
  EXPECT_NEAR(b.overhead_s, a.overhead_s + b.layer_calls_s, 1e-12);
  EXPECT_NEAR(b.step_s, a.step_s + b.layer_calls_s, 1e-12);
  EXPECT_DOUBLE_EQ(a.layer_calls_s, 0);
  EXPECT_NEAR(b.phase_total_s.at("forward"), a.phase_total_s.at("forward") + fwd * 1e-6, 1e-12);
  EXPECT_NEAR(b.phase_total_s.at("backward"), a.phase_total_s.at("backward") + bwd * 1e-6, 1e-12);
  for (const auto* s : {&a, &b}) {
    double sum = 0;
    for (const auto& [phase, t] : s->phase_total_s) sum += t;
    EXPECT_NEAR(sum, s->step_s, 1e-12);
  }
  EXPECT_NE(sim::format_simulation(b).find("4 elementwise layer calls"), std::string::npos);
  // A negative time, a bare number, no elements or an op that was not measured is refused,
  // naming the field.
  for (const auto& [op, v] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"relu", {{"forward", -1}, {"backward", 1}, {"elements", 8}}},
           {"relu", 3},
           {"relu", {{"forward", 1}, {"backward", 1}}},
           {"relu", {{"forward", 1}, {"backward", 1}, {"elements", 0}}},
           {"conv2d", {{"forward", 1}, {"backward", 1}, {"elements", 8}}}}) {
    nlohmann::json bad = base;
    bad["layer_call_us"] = {{op, v}};
    try {
      parse_platform(described(bad), "bad.json");
      FAIL() << "accepted " << op << " " << v.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("layer_call_us." + op), std::string::npos) << e.what();
    }
  }
}

// The step by phase, as a run measures it, sums to the step with every fixed cost in it, for a
// convolutional and a recurrent config (cell step time and gate elements).
TEST(Efficiency, TheStepByPhaseSumsToTheStep) {
  const nlohmann::json e = {{"op_overhead_us", 2},
                            {"conv_call_us", 30},
                            {"cell_step_us", {{"lstm", 70}}},
                            {"cell_ns_per_element", {{"lstm", 3}}}};
  const auto p = parse_platform(described(e), "p.json");
  for (const char* text : {"cnn:block=residual,blocks=1,filters=16,image=32",
                           "rnn:cell=lstm,layers=1,embed=32,length=8,vocab=64,batch=4"}) {
    const auto s =
        sim::simulate_step(p, step_cost(parse_config(text)), 4, sim::resolve_format(p, "fp32"));
    ASSERT_EQ(s.phase_total_s.size(), 3u) << text;
    double sum = 0;
    for (const auto& [phase, t] : s.phase_total_s) sum += t;
    EXPECT_NEAR(sum, s.step_s, 1e-9 * s.step_s) << text;
    EXPECT_GT(s.phase_total_s.at("forward"), s.phase_s.at("forward")) << text;
    EXPECT_GT(s.phase_total_s.at("optimizer"), s.phase_s.at("optimizer")) << text;
  }
}

// A measured time per step replaces the step's counted operators: the layer is one call
// per phase, its time steps are added at the stated cost, and a cell without one keeps
// the count.
TEST(Efficiency, AMeasuredCellStepTimeIsAddedPerTimeStepInsteadOfItsOperators) {
  StepCost c;
  c.layers.push_back(cost::recurrent("lstm0", "lstm", 8, 16, 32, 32, 4));
  c.layers.push_back(cost::recurrent("rnn0", "rnn", 8, 16, 32, 32, 4));
  const auto ops = sim::count_operators(c, {{"lstm", 70.0}});
  EXPECT_DOUBLE_EQ(ops.forward, 1 + 16 * 3);
  EXPECT_DOUBLE_EQ(ops.backward, 2 * (1 + 16 * 3) + 2 * 4);
  const auto plain = parse_platform(described({{"op_overhead_us", 2}}), "plain.json");
  const auto cells = parse_platform(
      described({{"op_overhead_us", 2}, {"cell_step_us", {{"lstm", 70}}}}), "cells.json");
  EXPECT_DOUBLE_EQ(cells.efficiency->cell_step_us.at("lstm"), 70);
  EXPECT_EQ(to_json(cells)["efficiency"]["cell_step_us"]["lstm"], 70);
  EXPECT_FALSE(to_json(plain)["efficiency"].contains("cell_step_us"));
  const auto f = sim::resolve_format(plain, "fp32");
  const auto a = sim::simulate_step(plain, c, 4, f);
  const auto b = sim::simulate_step(cells, c, 4, f);
  EXPECT_DOUBLE_EQ(b.cell_steps, 16);
  EXPECT_NEAR(b.cell_steps_s, 16 * 70e-6, 1e-15);
  // The lstm's 16 x 12 operators in each of its three phases leave; 3 calls and 16 steps come.
  EXPECT_NEAR(b.overhead_s, a.overhead_s - (3 * 16 * 12 - 3) * 2e-6 + 16 * 70e-6, 1e-12);
  EXPECT_NEAR(b.step_s - a.step_s, b.overhead_s - a.overhead_s, 1e-12);
  EXPECT_NE(sim::format_simulation(b, 10).find("16 recurrent time steps x 70 us"),
            std::string::npos);
}

// A cell's gate elements (batch x gates x hidden per time step) at their measured time each,
// added to the step's fixed costs beside the per-step operators, with or without those.
TEST(Efficiency, ACellsGateElementsTakeTheirMeasuredTime) {
  StepCost c;
  c.layers.push_back(cost::recurrent("lstm0", "lstm", 8, 16, 32, 32, 4));
  c.layers.push_back(cost::recurrent("gru0", "gru", 8, 16, 32, 32, 4));
  const auto plain = parse_platform(described({{"op_overhead_us", 2}}), "plain.json");
  const auto gated = parse_platform(
      described({{"op_overhead_us", 2}, {"cell_ns_per_element", {{"lstm", 4.0}, {"gru", 3.0}}}}),
      "gated.json");
  EXPECT_EQ(to_json(gated)["efficiency"]["cell_ns_per_element"]["gru"], 3.0);
  EXPECT_FALSE(to_json(plain)["efficiency"].contains("cell_ns_per_element"));
  const auto f = sim::resolve_format(plain, "fp32");
  const auto a = sim::simulate_step(plain, c, 4, f), b = sim::simulate_step(gated, c, 4, f);
  const double lstm = 16.0 * 8 * 4 * 32, gru = 16.0 * 8 * 3 * 32;
  EXPECT_DOUBLE_EQ(a.cell_elements, 0);
  EXPECT_DOUBLE_EQ(b.cell_elements, lstm + gru);
  EXPECT_NEAR(b.cell_elements_s, (lstm * 4 + gru * 3) * 1e-9, 1e-15);
  EXPECT_NEAR(b.step_s - a.step_s, b.cell_elements_s, 1e-12);
  EXPECT_NEAR(b.overhead_s - a.overhead_s, b.cell_elements_s, 1e-12);
  EXPECT_NE(sim::format_simulation(b, 10).find("+ 28672 gate elements x 3.57 ns"),
            std::string::npos)
      << sim::format_simulation(b, 10);
}

nlohmann::json cell_table(double scale = 1) {
  nlohmann::json pts = nlohmann::json::array();
  for (int hidden : {32, 128})
    for (int batch : {8, 32})
      pts.push_back(
          {{"hidden", hidden}, {"batch", batch}, {"us", scale * hidden * hidden * batch / 64}});
  return pts;
}

// The framework's recurrent layer measured per time step on a hidden x batch grid: read
// log-log between the points; nothing outside the grid.
TEST(Efficiency, TheCellStepTableIsReadLogLogInsideItsGrid) {
  const auto p = parse_platform(described({{"op_overhead_us", 2},
                                           {"cell_step_us", {{"lstm", 70}}},
                                           {"cell_step_table", {{"lstm", cell_table()}}}}),
                                "table.json");
  EXPECT_DOUBLE_EQ(p.cell_step_table_us("lstm", 32, 8), 128);
  EXPECT_NEAR(p.cell_step_table_us("lstm", 32, 32), 512, 1e-9);  // hidden and batch not swapped
  EXPECT_NEAR(p.cell_step_table_us("lstm", 128, 32), 8192, 1e-9);
  EXPECT_NEAR(p.cell_step_table_us("lstm", 64, 16), 1024, 1e-9);  // h^2 b / 64, a power law
  EXPECT_DOUBLE_EQ(p.cell_step_table_us("lstm", 256, 16), 0);     // beyond the grid
  EXPECT_DOUBLE_EQ(p.cell_step_table_us("lstm", 64, 4), 0);
  EXPECT_DOUBLE_EQ(p.cell_step_table_us("gru", 64, 16), 0);  // no table for the cell
  EXPECT_NE(format_platform(p).find("rnn layer lstm  128 us per time step at hidden 32 batch 8 "
                                    ".. 8192 us at hidden 128 batch 32 (4 points"),
            std::string::npos)
      << format_platform(p);
  EXPECT_EQ(to_json(parse_platform(to_json(p), "again")), to_json(p));
}

// A fp32 recurrent layer on the grid takes steps x its measured time per step, in place of its
// GEMMs, per-step operators and gate elements; off the grid, in another format, or with an
// input width other than its hidden size, the parts as before.
TEST(Efficiency, ARecurrentLayerOnTheTableTakesItsMeasuredTime) {
  const nlohmann::json base = {{"op_overhead_us", 2},
                               {"cell_step_us", {{"lstm", 70}}},
                               {"cell_ns_per_element", {{"lstm", 4.0}}}};
  nlohmann::json with = base;
  with["cell_step_table"] = {{"lstm", cell_table()}};
  const auto parts = parse_platform(described(base), "parts.json");
  const auto table = parse_platform(described(with), "table.json");
  StepCost c;
  c.layers.push_back(cost::recurrent("on", "lstm", 16, 10, 64, 64, 4));     // on the grid
  c.layers.push_back(cost::recurrent("off", "lstm", 16, 10, 256, 256, 4));  // hidden beyond it
  c.layers.push_back(cost::recurrent("wide", "lstm", 16, 10, 96, 64, 4));   // input != hidden
  const auto f = sim::resolve_format(parts, "fp32");
  const auto a = sim::simulate_step(parts, c, 4, f), b = sim::simulate_step(table, c, 4, f);
  ASSERT_EQ(b.layers.size(), 4u);  // and the optimizer
  EXPECT_NEAR(b.layers[0].time_s(), 10 * 64.0 * 16 * 1e-6, 1e-12);
  EXPECT_NEAR(b.layers[0].step_us, 64.0 * 16, 1e-9);
  EXPECT_EQ(b.layers[0].phases.size(), a.layers[0].phases.size());
  for (size_t i : {1, 2}) {
    EXPECT_DOUBLE_EQ(b.layers[i].time_s(), a.layers[i].time_s()) << i;
    EXPECT_DOUBLE_EQ(b.layers[i].step_us, 0) << i;
  }
  // The table's layer brings no per-step operators or gate elements of its own.
  EXPECT_DOUBLE_EQ(b.cell_steps, a.cell_steps - 10);
  EXPECT_DOUBLE_EQ(b.cell_elements, a.cell_elements - 10 * 16 * 4 * 64);
  EXPECT_EQ(b.table_layers, std::set<std::string>{"on"});
  const std::string why = sim::format_simulation(b, 10);
  EXPECT_NE(why.find("the layer as measured: 1.02e+03 us per time step"), std::string::npos) << why;
  EXPECT_NE(sim::format_explanation(b, table).find("cell_step_table"), std::string::npos);
  EXPECT_NEAR(sim::to_json(b)["layers"][0]["measured_step_us"].get<double>(), 64.0 * 16, 1e-9);
  // On half the cores, twice the time, as the GEMM peak's share; a packed sequence's real
  // steps only (cost::scale_to_packed keeps the padded GEMM shape).
  sim::SimOptions half;
  half.peak_share = 0.5;
  EXPECT_NEAR(sim::simulate_step(table, c, 4, f, half).layers[0].time_s(), 2 * b.layers[0].time_s(),
              1e-12);
  StepCost packed = c;
  cost::scale_to_packed(packed.layers[0], 0.5);
  EXPECT_NEAR(sim::simulate_step(table, packed, 4, f).layers[0].time_s(), b.layers[0].time_s() / 2,
              1e-12);
  // Measured in fp32: a bf16 step keeps the parts.
  const auto g = sim::resolve_format(parts, "bf16");
  EXPECT_DOUBLE_EQ(sim::simulate_step(table, c, 4, g).layers[0].time_s(),
                   sim::simulate_step(parts, c, 4, g).layers[0].time_s());
}

// The working-set curve, read log-log between its points and clamped at its ends.
TEST(Efficiency, TheWorkingSetCurveIsReadLogLog) {
  const auto p = parse_platform(
      described(
          {{"op_overhead_us", 2},
           {"working_set", {{{"bytes", 1e6}, {"gbps", 80}}, {{"bytes", 1e8}, {"gbps", 20}}}}}),
      "ws.json");
  EXPECT_DOUBLE_EQ(p.working_set_gbps(1e3), 80);
  EXPECT_DOUBLE_EQ(p.working_set_gbps(1e9), 20);
  EXPECT_NEAR(p.working_set_gbps(1e7), 40, 1e-9);  // halfway in log bytes: the geometric mean
  EXPECT_EQ(parse_platform(to_json(p), "again").efficiency->working_set.size(), 2u);
  EXPECT_DOUBLE_EQ(accelerator(1, 1).working_set_gbps(1e7), 0);
}

// With the working-set curve, a CPU's measured optimizer rate moves to the step's own working
// set (the ratio of the two sets' bandwidths) and replaces the bytes at main memory's
// bandwidth; without it that byte count stays a floor.
TEST(Efficiency, AMeasuredOptimizerRateFollowsTheWorkingSet) {
  nlohmann::json j = described(
      {{"op_overhead_us", 2}, {"optimizer_ns_per_param", {{"fp32", {{"rmsprop", 1.0}}}}}});
  j["kind"] = "cpu";
  j["memory_bandwidth_gbps"] = 1;  // the bytes alone: ~28 ns per parameter
  const auto floor_only = parse_platform(j, "cpu.json");
  const StepCost small = step_cost(parse_config(
      "fc:layers=2,nodes=256,input=784,output=10,batch=64,optimizer=rmsprop,dtype=fp32"));
  const StepCost large = step_cost(parse_config(
      "fc:layers=4,nodes=4096,input=784,output=10,batch=64,optimizer=rmsprop,dtype=fp32"));
  const auto f = sim::resolve_format(floor_only, "fp32");
  EXPECT_GT(optimizer_time(sim::simulate_step(floor_only, small, 4, f)),
            10 * small.opt_params * 1e-9);
  // RMSprop's set: weight, gradient and two state tensors, 16 bytes a parameter. The measured
  // rate's, kOptimizerMeasuredParams x 16 = 34 MB, and the small model's 4 MB run at 50 GB/s;
  // the large one's 860 MB at 20.
  j["efficiency"]["working_set"] = {{{"bytes", 1e6}, {"gbps", 50}},
                                    {{"bytes", 4e7}, {"gbps", 50}},
                                    {{"bytes", 3e8}, {"gbps", 20}}};
  const auto curve = parse_platform(j, "cpu-ws.json");
  const auto set = [](const StepCost& c) {
    return c.memory.weights + c.memory.gradients + c.memory.optimizer_state;
  };
  EXPECT_NEAR(set(small) / small.opt_params, 16, 1e-9);
  EXPECT_NEAR(set(large) / large.opt_params, 16, 1e-9);
  EXPECT_LT(set(small), 4e7);
  EXPECT_GT(set(large), 3e8);
  EXPECT_NEAR(optimizer_time(sim::simulate_step(curve, small, 4, f)), small.opt_params * 1e-9,
              1e-12);
  EXPECT_NEAR(optimizer_time(sim::simulate_step(curve, large, 4, f)),
              large.opt_params * 1e-9 * 50 / 20, 1e-9);
}

// ATen runs an elementwise pass over fewer than its grain of elements on one thread: on a
// 4-core description, a model whose layers are all below it updates at a quarter of the
// measured rate, one whose layers are all above at the rate; a run on one core is serial
// either way.
TEST(Efficiency, SmallParameterTensorsUpdateOnOneThread) {
  nlohmann::json j = described(
      {{"op_overhead_us", 0}, {"optimizer_ns_per_param", {{"fp32", {{"rmsprop", 1.0}}}}}});
  j["kind"] = "cpu";
  j["cores"] = 4;
  j["memory_bandwidth_gbps"] = 1e6;  // the bytes take no time
  const auto p = parse_platform(j, "cpu.json");
  const auto f = sim::resolve_format(p, "fp32");
  const auto optimizer_s = [&](const StepCost& c, double share) {
    sim::SimOptions o;
    o.peak_share = share;
    return optimizer_time(sim::simulate_step(p, c, 4, f, o));
  };
  // 100 x 100 weights (10000 elements) against 512 x 512 (262144).
  const StepCost narrow = step_cost(parse_config(
      "fc:layers=2,nodes=100,input=100,output=100,batch=8,optimizer=rmsprop,dtype=fp32"));
  const StepCost wide = step_cost(parse_config(
      "fc:layers=2,nodes=512,input=512,output=512,batch=8,optimizer=rmsprop,dtype=fp32"));
  for (const auto& l : narrow.layers) EXPECT_LT(l.params, kAtenGrainElements) << l.name;
  for (const auto& l : wide.layers)
    if (l.params > 0) EXPECT_GT(l.params, kAtenGrainElements) << l.name;
  EXPECT_NEAR(optimizer_s(narrow, 1), narrow.opt_params * 1e-9 * 4, 1e-12);
  EXPECT_NEAR(optimizer_s(wide, 1), wide.opt_params * 1e-9, 1e-12);
  // On one of the 4 cores: a quarter of the rate, whatever the tensors' sizes.
  EXPECT_NEAR(optimizer_s(narrow, 0.25), narrow.opt_params * 1e-9 * 4, 1e-12);
  EXPECT_NEAR(optimizer_s(wide, 0.25), wide.opt_params * 1e-9 * 4, 1e-12);
}

// A CPU's measured optimizer step: the update takes at least parameters x the rate of the
// parameters' dtype and the config's optimizer (on a share of the cores, that share of the
// rate), in every format that keeps its state in that dtype; other optimizers, dtypes and
// device kinds keep the bytes' time.
TEST(Efficiency, ACpusMeasuredOptimizerStepBoundsTheUpdate) {
  nlohmann::json j = described(
      {{"op_overhead_us", 2},
       {"optimizer_ns_per_param", {{"bf16", {{"rmsprop", 3.0}}}, {"fp32", {{"rmsprop", 2.5}}}}}});
  j["kind"] = "cpu";
  j["memory_bandwidth_gbps"] = 1000;  // the bytes' time far below the stated rates
  const auto cpu = parse_platform(j, "cpu.json");
  EXPECT_DOUBLE_EQ(cpu.efficiency->optimizer_ns_per_param.at("bf16").at("rmsprop"), 3.0);
  EXPECT_EQ(to_json(cpu)["efficiency"]["optimizer_ns_per_param"]["fp32"]["rmsprop"], 2.5);
  j["kind"] = "accelerator";
  const auto accel = parse_platform(j, "accel.json");
  for (const char* dtype : {"bf16", "fp32"}) {
    const std::string cfg =
        std::string("fc:layers=2,nodes=512,input=784,output=10,batch=64,optimizer=rmsprop,dtype=") +
        dtype;
    const StepCost c = step_cost(parse_config(cfg));
    ASSERT_EQ(c.optimizer, "rmsprop");
    EXPECT_DOUBLE_EQ(c.opt_params, double(c.params));
    const double ns = std::string(dtype) == "bf16" ? 3.0 : 2.5;
    const auto f = sim::resolve_format(cpu, dtype);
    const auto on_cpu = sim::simulate_step(cpu, c, 4, f);
    EXPECT_NEAR(optimizer_time(on_cpu), c.opt_params * ns * 1e-9, 1e-12) << dtype;
    sim::SimOptions half;
    half.peak_share = 0.5;
    EXPECT_NEAR(optimizer_time(sim::simulate_step(cpu, c, 4, f, half)),
                2 * c.opt_params * ns * 1e-9, 1e-12)
        << dtype;
    // The bytes' time alone elsewhere: far below the stated rate at these bandwidths.
    EXPECT_LT(optimizer_time(sim::simulate_step(accel, c, 4, f)), optimizer_time(on_cpu) / 10)
        << dtype;
  }
  const StepCost amp = step_cost(parse_config(
      "fc:layers=2,nodes=512,input=784,output=10,batch=64,optimizer=rmsprop,dtype=fp32"));
  // Automatic mixed precision keeps the state in fp32 (the fp32 rate) and casts the weights
  // to bf16 once a step besides (read 4, write 2 bytes each, at the bandwidth).
  EXPECT_NEAR(optimizer_time(sim::simulate_step(cpu, amp, 4, sim::resolve_format(cpu, "amp-bf16"))),
              amp.opt_params * 2.5e-9 + double(amp.params) * 6 / 1000e9, 1e-12);
  // An optimizer the description has no rate for keeps the bytes' time.
  const StepCost sgd = step_cost(
      parse_config("fc:layers=2,nodes=512,input=784,output=10,batch=64,optimizer=sgd,dtype=fp32"));
  EXPECT_LT(optimizer_time(sim::simulate_step(cpu, sgd, 4, sim::resolve_format(cpu, "fp32"))),
            sgd.opt_params * 1e-9);
}

// The loss's measured time per element applies to it as to any elementwise layer.
TEST(Efficiency, TheLossTakesItsMeasuredTimePerElement) {
  StepCost c;
  c.layers.push_back(cost::softmax_xent("loss", 512, 256, 4));
  EXPECT_DOUBLE_EQ(c.layers[0].elements, 512.0 * 256);
  PlatformDescription p = accelerator(1, 1000);
  const auto f = sim::resolve_format(p, "fp32");
  p.efficiency = curve({});
  p.efficiency->op_ns_per_element = {{"softmax_xent", 2.5}};
  const auto s = sim::simulate_step(p, c, 4, f);
  EXPECT_NEAR(s.layers[0].time_s(), 512.0 * 256 * 2.5e-9, 1e-12);
}

// A depthwise convolution is priced per element where the description measured it; a dense
// or grouped one with several channels per group stays a GEMM on the curve.
TEST(Efficiency, DepthwiseConvolutionsTakeTheirMeasuredTimePerElement) {
  StepCost c;
  // 32 x 96 x 56 x 56 in, stride 2: the output is a quarter of the input.
  c.layers.push_back(cost::conv("dw", {32, 96, 56, 56, 96, 3, 3, 2, 2, 1, 1, 96, false}, 4, true));
  c.layers.push_back(
      cost::conv("grouped", {32, 96, 56, 56, 96, 3, 3, 1, 1, 1, 1, 2, false}, 4, true));
  EXPECT_DOUBLE_EQ(c.layers[0].elements, 32.0 * 96 * 56 * 56);
  EXPECT_DOUBLE_EQ(c.layers[1].elements, 0);
  PlatformDescription p = accelerator(1, 1000);
  const auto f = sim::resolve_format(p, "fp32");
  p.efficiency = curve({});
  const auto a = sim::simulate_step(p, c, 4, f);
  p.efficiency->op_ns_per_element = {{"gconv2d", 6.0}};
  const auto b = sim::simulate_step(p, c, 4, f);
  EXPECT_NEAR(b.layers[0].time_s(), 32.0 * 96 * 56 * 56 * 6e-9, 1e-12);
  EXPECT_DOUBLE_EQ(b.layers[1].time_s(), a.layers[1].time_s());
}

TEST(Efficiency, BadValuesAreRefusedNamingTheField) {
  auto refused = [](const nlohmann::json& e, const std::string& field) {
    try {
      parse_platform(described(e), "bad.json");
      ADD_FAILURE() << "accepted " << e.dump();
    } catch (const UsageError& err) {
      EXPECT_NE(std::string(err.what()).find("field '" + field + "'"), std::string::npos)
          << err.what();
    }
  };
  refused({{"op_overhead_us", -1}}, "efficiency.op_overhead_us");
  refused({{"op_overhead_us", "5"}}, "efficiency.op_overhead_us");
  refused({{"gemm", {{"fp32", {{{"n", 16}, {"fraction_of_peak", 1.5}}}}}}},
          "efficiency.gemm.fp32[0].fraction_of_peak");
  refused({{"gemm", {{"fp32", {{{"n", 16}, {"fraction_of_peak", 0}}}}}}},
          "efficiency.gemm.fp32[0].fraction_of_peak");
  refused({{"gemm",
            {{"fp32",
              {{{"n", 16}, {"fraction_of_peak", 0.5}}, {{"n", -2}, {"fraction_of_peak", 0.5}}}}}}},
          "efficiency.gemm.fp32[1].n");
  refused({{"gemm",
            {{"fp32",
              {{{"n", 16}, {"fraction_of_peak", 0.5}}, {{"n", 16}, {"fraction_of_peak", 0.6}}}}}}},
          "efficiency.gemm.fp32");
  refused({{"gemm", {{"fp33", {{{"n", 16}, {"fraction_of_peak", 0.5}}}}}}}, "efficiency.gemm.fp33");
  refused({{"gemm", {{"fp32", nlohmann::json::array()}}}}, "efficiency.gemm.fp32");
  refused({{"conv", {{"fp32", {{{"n", 16}, {"fraction_of_peak", 2}}}}}}},
          "efficiency.conv.fp32[0].fraction_of_peak");
  refused({{"op_ns_per_element", {{"relu", -1}}}}, "efficiency.op_ns_per_element.relu");
  refused({{"memory_fraction", 0}}, "efficiency.memory_fraction");
  refused({{"conv_call_us", -3}}, "efficiency.conv_call_us");
  refused({{"host_op_us", -1}}, "efficiency.host_op_us");
  refused({{"host_op_us", "9"}}, "efficiency.host_op_us");
  refused({{"host_step_us", -1}}, "efficiency.host_step_us");
  refused({{"gemm_alignment", {{"bf16", {{"3", 0.5}}}}}}, "efficiency.gemm_alignment.bf16.3");
  refused({{"gemm_alignment", {{"bf16", {{"2", 0}}}}}}, "efficiency.gemm_alignment.bf16.2");
  refused({{"gemm_alignment", {{"bf16", {{"2", 1.5}}}}}}, "efficiency.gemm_alignment.bf16.2");
  refused({{"gemm_alignment", {{"bf17", {{"2", 0.5}}}}}}, "efficiency.gemm_alignment.bf17");
  refused({{"gemm_alignment", {{"bf16", nlohmann::json::object()}}}},
          "efficiency.gemm_alignment.bf16");
  refused({{"cell_step_us", {{"lstm", -1}}}}, "efficiency.cell_step_us.lstm");
  refused({{"cell_step_us", {{"transformer", 5}}}}, "efficiency.cell_step_us.transformer");
  refused({{"cell_step_us", 5}}, "efficiency.cell_step_us");
  refused({{"optimizer_ns_per_param", {{"fp32", {{"lion", 2}}}}}},
          "efficiency.optimizer_ns_per_param.fp32.lion");
  refused({{"optimizer_ns_per_param", {{"fp33", {{"sgd", 2}}}}}},
          "efficiency.optimizer_ns_per_param.fp33");
  refused({{"optimizer_ns_per_param", {{"fp32", {{"sgd", 0}}}}}},
          "efficiency.optimizer_ns_per_param.fp32.sgd");
  refused({{"optimizer_ns_per_param", 3}}, "efficiency.optimizer_ns_per_param");
  refused({{"cell_ns_per_element", {{"lstm", 0}}}}, "efficiency.cell_ns_per_element.lstm");
  refused({{"cell_ns_per_element", {{"tcn", 2}}}}, "efficiency.cell_ns_per_element.tcn");
  refused({{"working_set", nlohmann::json::array()}}, "efficiency.working_set");
  refused({{"cell_step_table", {{"tcn", cell_table()}}}}, "efficiency.cell_step_table.tcn");
  refused({{"cell_step_table", {{"gru", cell_table()}}}}, "efficiency.cell_step_table.gru");
  nlohmann::json holed = cell_table();
  holed.erase(holed.begin() + 1);
  refused({{"cell_step_table", {{"gru", holed}}}}, "efficiency.cell_step_table.gru");
  nlohmann::json twice = cell_table();
  twice[1] = twice[0];
  refused({{"cell_step_table", {{"gru", twice}}}}, "efficiency.cell_step_table.gru");
  nlohmann::json slow = cell_table();
  slow[2]["us"] = -1;
  refused({{"cell_step_table", {{"rnn", slow}}}}, "efficiency.cell_step_table.rnn[2].us");
  nlohmann::json odd = cell_table();
  odd[0]["hidden"] = 0;
  refused({{"cell_step_table", {{"rnn", odd}}}}, "efficiency.cell_step_table.rnn[0].hidden");
  refused({{"working_set", {{{"bytes", 1024}, {"gbps", -3}}}}}, "efficiency.working_set[0].gbps");
  refused({{"working_set", {{{"bytes", 4096}, {"gbps", 30}}, {{"bytes", 1024}, {"gbps", 60}}}}},
          "efficiency.working_set[1].bytes");
  refused({{"working_set", {{{"size", 4096}, {"gbps", 30}}}}}, "efficiency.working_set[0]");
  refused({{"memory_fraction", 1.2}}, "efficiency.memory_fraction");
  refused({{"op_overhead", 5}}, "efficiency.op_overhead");
  refused({{"gemm_rows", {{"fp32", {{{"rows", 0}, {"n", 64}, {"fraction_of_peak", 0.5}}}}}}},
          "efficiency.gemm_rows.fp32[0].rows");
  refused({{"conv_rows", {{"fp32", {{{"rows", 32}, {"n", 64}, {"fraction_of_peak", 0}}}}}}},
          "efficiency.conv_rows.fp32[0].fraction_of_peak");
  refused({{"gemm_rows", {{"fp32", {{{"rows", 16}, {"n", 64}, {"fraction_of_peak", 1.5}}}}}}},
          "efficiency.gemm_rows.fp32[0].fraction_of_peak");
  refused({{"gemm_rows", {{"fp32", {{{"rows", 16}, {"fraction_of_peak", 0.5}}}}}}},
          "efficiency.gemm_rows.fp32[0]");
  refused({{"gemm_rows",
            {{"fp32",
              {{{"rows", 16}, {"n", 64}, {"fraction_of_peak", 0.5}},
               {{"rows", 16}, {"n", 64}, {"fraction_of_peak", 0.4}}}}}}},
          "efficiency.gemm_rows.fp32");
  refused({{"gemm_rows", {{"fp99", {{{"rows", 16}, {"n", 64}, {"fraction_of_peak", 0.5}}}}}}},
          "efficiency.gemm_rows.fp99");
  refused({{"gemm_tiles", {{"fp32", {{128, 0}}}}}}, "efficiency.gemm_tiles.fp32[0]");
  refused({{"gemm_tiles", {{"fp32", {{128}}}}}}, "efficiency.gemm_tiles.fp32[0]");
  refused({{"gemm_tiles", {{"fp32", nlohmann::json::array()}}}}, "efficiency.gemm_tiles.fp32");
  refused({{"gemm_tiles", {{"fp99", {{128, 128}}}}}}, "efficiency.gemm_tiles.fp99");
  refused(5, "efficiency");
}

TEST(Validation, ErrorPercentiles) {
  std::vector<sim::ValidationPoint> pts;
  for (double e : {0.1, 0.5, 0.3, 0.2, 0.4}) pts.push_back({"c", "fc", "p", 1 + e, 1.0});
  const auto s = sim::error_stats(pts);
  EXPECT_EQ(s.n, 5u);
  EXPECT_NEAR(s.median, 0.3, 1e-12);
  EXPECT_NEAR(s.p90, 0.46, 1e-12);  // 0.4 + 0.6 x (0.5 - 0.4)
  EXPECT_NEAR(s.median_ratio, 1.3, 1e-12);
}

// Each point carries its runs' spread between processes and the unstable flag; the stats and
// the text say how far the measurements themselves disagree, so an error is read against it.
TEST(Validation, ErrorsStandBesideTheMeasurementsOwnSpread) {
  RunSet runs;
  runs.platforms.push_back({"p", accelerator(1, 30), ""});
  auto run = [](const std::string& config, double step_s, double reps, double max_over_min,
                double unstable) {
    tb::Run r;
    r.config = config;
    r.family = "fc";
    r.status = "ok";
    r.platform = "p";
    r.metrics = {{"step_median_s", step_s},
                 {"repetitions", reps},
                 {"rep_max_over_min", max_over_min},
                 {"unstable", unstable}};
    return r;
  };
  runs.runs.push_back(run("fc:layers=2,nodes=64,batch=8", 1e-3, 2, 1.10, 0));
  runs.runs.push_back(run("fc:layers=2,nodes=128,batch=8", 1e-3, 5, 1.30, 1));
  runs.runs.push_back(run("fc:layers=2,nodes=256,batch=8", 1e-3, 1, 1.0, 0));  // one process
  const auto vs = sim::validate(runs);
  ASSERT_EQ(vs.size(), 1u);
  ASSERT_EQ(vs[0].points.size(), 3u);
  EXPECT_NEAR(vs[0].points[0].spread, 0.10, 1e-12);
  EXPECT_TRUE(vs[0].points[1].unstable);
  EXPECT_TRUE(std::isnan(vs[0].points[2].spread));
  const auto& all = vs[0].all;
  EXPECT_EQ(all.with_spread, 2u);
  EXPECT_NEAR(all.median_spread, 0.20, 1e-12);
  EXPECT_EQ(all.unstable, 1u);
  const std::string text = sim::format_validation(vs);
  EXPECT_NE(text.find("measured spread"), std::string::npos) << text;
  EXPECT_NE(text.find("20.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("1 of 3 runs unstable"), std::string::npos) << text;
  const auto j = sim::to_json(vs[0]);
  EXPECT_NEAR(j["errors"]["median_spread"].get<double>(), 0.20, 1e-12);
  EXPECT_EQ(j["errors"]["unstable"], 1);
  EXPECT_FALSE(j["points"][2].contains("spread"));
  // Published figures have no spread: the column says so.
  std::vector<sim::ValidationPoint> pub = {{"c", "fc", "p", 1.2, 1.0}};
  EXPECT_EQ(sim::error_stats(pub).with_spread, 0u);
}

// A run that timed its phases is compared phase by phase with the model's split of its step:
// per point both times, per family each phase's median predicted / measured; runs without
// phases (older stores) are left out of that, not counted as zero.
TEST(Validation, PhasesAreComparedWhereTheRunTimedThem) {
  RunSet runs;
  runs.platforms.push_back({"p", accelerator(1, 30), ""});
  const auto run = [](const std::string& config, double fwd) {
    tb::Run r;
    r.config = config;
    r.family = "fc";
    r.status = "ok";
    r.platform = "p";
    r.metrics = {{"step_median_s", 1e-3}};
    if (fwd > 0)
      r.metrics.insert(
          {{"phase_forward_s", fwd}, {"phase_backward_s", 5e-4}, {"phase_optimizer_s", 1e-4}});
    return r;
  };
  runs.runs.push_back(run("fc:layers=2,nodes=64,batch=8", 4e-4));
  runs.runs.push_back(run("fc:layers=2,nodes=128,batch=8", 2e-4));
  runs.runs.push_back(run("fc:layers=2,nodes=256,batch=8", 0));
  const auto vs = sim::validate(runs);
  ASSERT_EQ(vs.size(), 1u);
  ASSERT_EQ(vs[0].points.size(), 3u);
  const auto& p0 = vs[0].points[0];
  ASSERT_EQ(p0.phases.size(), 3u);
  const auto s0 =
      sim::simulate_config(runs.platforms[0].description.value(), parse_config(p0.config));
  EXPECT_DOUBLE_EQ(p0.phases.at("forward").first, s0.phase_total_s.at("forward"));
  EXPECT_DOUBLE_EQ(p0.phases.at("forward").second, 4e-4);
  EXPECT_TRUE(vs[0].points[2].phases.empty());
  const auto& ratio = vs[0].all.phase_ratio.at("forward");
  EXPECT_EQ(ratio.second, 2u);
  const double r0 = p0.phases.at("forward").first / 4e-4,
               r1 = vs[0].points[1].phases.at("forward").first / 2e-4;
  EXPECT_NEAR(ratio.first, (r0 + r1) / 2, 1e-12);  // the median of two
  const std::string text = sim::format_validation(vs);
  EXPECT_NE(text.find("by phase"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("forward {:.3f} (2)", ratio.first)), std::string::npos) << text;
  const auto j = sim::to_json(vs[0]);
  EXPECT_DOUBLE_EQ(j["points"][0]["phases"]["forward"]["measured_s"].get<double>(), 4e-4);
  EXPECT_EQ(j["errors"]["phases"]["forward"]["runs"], 2);
  EXPECT_FALSE(j["points"][2].contains("phases"));
}

// A description measured hours away from the runs it predicts says so, with both times: a
// shared host's speed drifts over hours. Among the runs, or within half an hour, nothing.
TEST(Validation, SaysWhenTheDescriptionWasMeasuredHoursFromTheRuns) {
  EXPECT_DOUBLE_EQ(
      sim::hours_apart("2026-11-27T16:51:36Z", "2026-11-27T22:38:00Z", "2026-11-27T22:41:00Z"),
      (22 * 3600 + 38 * 60 - (16 * 3600 + 51 * 60 + 36)) / 3600.0);
  EXPECT_DOUBLE_EQ(
      sim::hours_apart("2026-11-28T01:00:00Z", "2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z"),
      2.0);
  EXPECT_DOUBLE_EQ(
      sim::hours_apart("2026-11-27T22:39:00Z", "2026-11-27T22:38:00Z", "2026-11-27T22:41:00Z"),
      0.0);
  EXPECT_TRUE(std::isnan(sim::hours_apart("", "2026-11-27T22:38:00Z", "2026-11-27T22:41:00Z")));
  EXPECT_TRUE(std::isnan(sim::hours_apart("yesterday", "2026-11-27T22:38:00Z", "x")));
  EXPECT_TRUE(std::isnan(sim::hours_apart("2026-11-27T16:51:36Z\x1b[31m", "2026-11-27T22:38:00Z",
                                          "2026-11-27T22:41:00Z")));

  RunSet runs;
  PlatformDescription d = accelerator(1, 30);
  d.extra["measured_at"] = "2026-11-27T16:51:36Z";
  runs.platforms.push_back({"p", d, ""});
  for (const auto& [config, from, to] :
       {std::tuple{"fc:layers=2,nodes=64,batch=8", "2026-11-27T22:40:00Z", "2026-11-27T22:41:00Z"},
        std::tuple{"fc:layers=2,nodes=128,batch=8", "2026-11-27T22:38:00Z",
                   "2026-11-27T22:39:00Z"}}) {
    tb::Run r;
    r.config = config;
    r.family = "fc";
    r.status = "ok";
    r.platform = "p";
    r.started_at = from;
    r.finished_at = to;
    r.metrics = {{"step_median_s", 1e-3}};
    runs.runs.push_back(r);
  }
  auto vs = sim::validate(runs);
  ASSERT_EQ(vs.size(), 1u);
  EXPECT_EQ(vs[0].runs_from, "2026-11-27T22:38:00Z");
  EXPECT_EQ(vs[0].runs_to, "2026-11-27T22:41:00Z");
  EXPECT_NEAR(vs[0].hours_apart, 5.774, 1e-3);
  std::string text = sim::format_validation(vs);
  EXPECT_NE(text.find("the description at 2026-11-27T16:51:36Z, the runs 2026-11-27T22:38:00Z to "
                      "2026-11-27T22:41:00Z, 5.8 hours between them"),
            std::string::npos)
      << text;
  EXPECT_EQ(sim::to_json(vs[0])["measured"]["description_measured_at"], "2026-11-27T16:51:36Z");
  // Measured beside the runs: no line.
  runs.platforms[0].description->extra["measured_at"] = "2026-11-27T22:37:00Z";
  vs = sim::validate(runs);
  EXPECT_LT(vs[0].hours_apart, 0.5);
  text = sim::format_validation(vs);
  EXPECT_EQ(text.find("measured apart"), std::string::npos) << text;
  // A description without a measurement time (the registry's): nothing known, nothing said.
  runs.platforms[0].description->extra.erase("measured_at");
  vs = sim::validate(runs);
  EXPECT_TRUE(std::isnan(vs[0].hours_apart));
  EXPECT_TRUE(sim::to_json(vs[0])["measured"]["hours_apart"].is_null());
}

TEST(Validation, PredictsEveryOkRunOfASyntheticStore) {
  const std::string path =
      ::testing::TempDir() + "/simvalidate-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  {
    auto store = Store::open(path);
    testing::SyntheticOptions o;
    o.runs = 40;
    testing::fill_synthetic_store(*store, o);
  }
  const RunSet runs = load_runs({path});
  const auto vs = sim::validate(runs);
  ASSERT_EQ(vs.size(), 2u);  // "slow" and "fast", both with descriptions
  size_t ok = 0;
  for (const auto& r : runs.runs) ok += r.ok();
  size_t predicted = 0;
  for (const auto& v : vs) {
    predicted += v.points.size();
    EXPECT_TRUE(v.skipped.empty());
    const auto& d =
        *std::find_if(runs.platforms.begin(), runs.platforms.end(), [&](const PlatformInfo& i) {
           return i.name == v.platform;
         })->description;
    for (const auto& p : v.points) {
      EXPECT_DOUBLE_EQ(p.predicted_s, sim::simulate_config(d, parse_config(p.config)).step_s);
      const tb::Run& r = *std::find_if(runs.runs.begin(), runs.runs.end(), [&](const tb::Run& x) {
        return x.config == p.config && x.platform == v.platform;
      });
      EXPECT_DOUBLE_EQ(p.measured_s, r.metric("step_median_s"));
    }
    EXPECT_EQ(v.per_family.at("fc").n, v.points.size());
    EXPECT_DOUBLE_EQ(v.per_family.at("fc").median, v.all.median);
  }
  EXPECT_EQ(predicted, ok);
  // An override description replaces every stored one.
  PlatformDescription big = accelerator(1000, 1e6);
  const auto over = sim::validate(runs, big);
  ASSERT_EQ(over.size(), 2u);
  EXPECT_LT(over[0].points[0].predicted_s, vs[0].points[0].predicted_s);
  // Both named: where the runs were measured, and the description that predicted them.
  EXPECT_EQ(over[0].platform, vs[0].platform);
  EXPECT_EQ(over[0].description, big.name);
  EXPECT_NE(sim::format_validation(over).find("(predicted from the description " + big.name + ")"),
            std::string::npos)
      << sim::format_validation(over);
  EXPECT_EQ(sim::to_json(over[0])["description"], big.name);
  // The report gains the section: the chart and the error table.
  const std::string out = ::testing::TempDir() + "/simreport-" + std::to_string(getpid()) + ".html";
  write_report({path}, out, {});
  const std::string html = ::tb::testing::read_text(out);
  EXPECT_NE(html.find("id=\"simulation\""), std::string::npos);
  EXPECT_NE(html.find("median |pred-meas|/meas"), std::string::npos);
  std::remove(out.c_str());
  std::remove(path.c_str());
}

std::string write_csv(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/tb_pub_" + std::to_string(getpid()) + "_" + name + ".csv";
  std::ofstream(path) << text;
  return path;
}

const char* const kPublishedHeader = "config,platform,format,batch,throughput,unit,source,note\n";

// A row is predicted from its platform's description in its format, at its batch: the same
// step time simulate gives, against batch / throughput.
TEST(Published, ARowIsPredictedAsSimulateWouldAndComparedAsAThroughput) {
  const std::string path = write_csv(
      "one", std::string(kPublishedHeader) +
                 "\"fc:layers=2,nodes=1024,batch=8\",a100-sxm4-80gb,tf32,512,\"2e6\",samples/s,"
                 "\"a test, with a comma\",\n");
  const auto rows = sim::read_published(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].batch, 512);
  EXPECT_NE(rows[0].config.find("batch=512"), std::string::npos);  // the batch column wins
  EXPECT_EQ(rows[0].source, "a test, with a comma");
  const auto vs = sim::validate_published(rows);
  ASSERT_EQ(vs.size(), 1u);
  ASSERT_EQ(vs[0].points.size(), 1u);
  const auto& p = vs[0].points[0];
  const auto s =
      sim::simulate_config(find_platform("a100-sxm4-80gb"), parse_config(rows[0].config), "tf32");
  EXPECT_DOUBLE_EQ(p.predicted_s, s.step_s);
  EXPECT_DOUBLE_EQ(p.measured_s, 512 / 2e6);
  EXPECT_DOUBLE_EQ(vs[0].all.median, std::abs(s.step_s - 512 / 2e6) / (512 / 2e6));
  const auto j = sim::to_json(vs[0]);
  EXPECT_EQ(j["points"][0]["format"], "tf32");
  EXPECT_NEAR(j["points"][0]["published_per_s"].get<double>(), 2e6, 1e-6);
  std::remove(path.c_str());
}

// A tokens row: `batch` counts tokens, the config's batch x seq shapes them (and must equal
// it), and the published step is batch / throughput.
TEST(Published, ATokensRowIsAStepOfBatchTokensShapedByTheConfig) {
  const std::string cfg =
      "\"transformer:layers=2,d_model=256,heads=4,ff=1024,vocab=1000,seq=16,batch=";
  const std::string path = write_csv("tok", std::string(kPublishedHeader) + cfg +
                                                "64\",v100-sxm2-16gb,fp32,1024,5e4,tokens/s,s,\n");
  const auto rows = sim::read_published(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].tokens);
  EXPECT_NE(rows[0].config.find("batch=64"), std::string::npos);  // not the token count
  const auto vs = sim::validate_published(rows);
  const auto& p = vs.at(0).points.at(0);
  const auto s =
      sim::simulate_config(find_platform("v100-sxm2-16gb"), parse_config(rows[0].config), "fp32");
  EXPECT_DOUBLE_EQ(p.predicted_s, s.step_s);
  EXPECT_DOUBLE_EQ(p.measured_s, 1024 / 5e4);
  EXPECT_EQ(p.unit, "tokens/s");
  EXPECT_EQ(sim::to_json(vs[0])["points"][0]["unit"], "tokens/s");
  std::remove(path.c_str());
  // 63 x 16 tokens are not the 1024 the source's step holds.
  const std::string bad =
      write_csv("tokbad", std::string(kPublishedHeader) + cfg +
                              "63\",v100-sxm2-16gb,fp32,1024,5e4,tokens/s,s,\n");
  std::string what;
  try {
    sim::read_published(bad);
  } catch (const UsageError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(":2: field 'batch': 1024 tokens per step, but the config's batch x seq is "
                      "63 x 16 = 1008"),
            std::string::npos)
      << what;
  std::remove(bad.c_str());
}

// The shipped rows all read, with their sources, over V100, A100 and H100, and include the
// issue's two V100 figures.
TEST(Published, TheShippedFileCoversV100A100AndH100WithSources) {
  const auto rows = sim::read_published(sim::shipped_published_path());
  std::set<std::string> platforms;
  bool fp32_112 = false, amp_256 = false;
  for (const auto& r : rows) {
    platforms.insert(r.platform);
    EXPECT_FALSE(r.source.empty()) << r.line;
    fp32_112 |= r.platform == "v100-sxm2-16gb" && r.format == "fp32" && r.batch == 112 &&
                r.throughput == 367;
    amp_256 |= r.platform == "v100-sxm2-16gb" && r.format == "amp-fp16" && r.batch == 256 &&
               r.throughput == 1200;
  }
  EXPECT_TRUE(fp32_112 && amp_256);
  // A second family, in tokens: DeepLearningExamples' Transformer-big.
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](const sim::PublishedRow& r) {
    return r.tokens && r.config.rfind("transformer:", 0) == 0;
  }));
  for (const char* p : {"v100-sxm2-16gb", "a100-sxm4-80gb", "h100-sxm5-80gb"})
    EXPECT_TRUE(platforms.count(p)) << p;
  const auto vs = sim::validate_published(rows);
  size_t n = 0;
  for (const auto& v : vs) n += v.points.size();
  EXPECT_EQ(n, rows.size());
}

// A malformed row: one line naming the file, line and field, exit 2.
TEST(Published, MalformedRowsNameFileLineAndField) {
  auto error_of = [](const std::string& name, const std::string& body) {
    const std::string path = write_csv(name, body);
    std::string what = "no error";
    try {
      sim::read_published(path);
    } catch (const UsageError& e) {
      what = e.what();
    }
    std::remove(path.c_str());
    return what.substr(what.find(".csv") + 4);
  };
  const std::string ok = "resnet50:batch=8,v100-sxm2-16gb,fp32,8,100,images/s,s,\n";
  EXPECT_EQ(error_of("h", "config,platform,format,batch,throughput,unit\n"),
            ":1: missing column 'source'");
  EXPECT_EQ(
      error_of("fam", kPublishedHeader + ok + "bert:batch=8,v100-sxm2-16gb,fp32,8,1,img/s,s,\n")
          .rfind(":3: field 'config': unknown family 'bert'", 0),
      0u);
  EXPECT_EQ(
      error_of("plat", kPublishedHeader + std::string("resnet50,no-such-gpu,fp32,8,100,img/s,s,\n"))
          .rfind(":2: field 'platform':", 0),
      0u);
  EXPECT_EQ(error_of("fmt", kPublishedHeader +
                                std::string("resnet50,v100-sxm2-16gb,amp-bf16,8,100,img/s,s,\n")),
            ":2: field 'format': platform 'v100-sxm2-16gb' states no bf16 peak (it states fp16, "
            "fp32, fp64), nor what it runs bf16 as (runs_as)");
  EXPECT_EQ(error_of("thr", kPublishedHeader +
                                std::string("resnet50,v100-sxm2-16gb,fp32,8,-3,img/s,s,\n")),
            ":2: field 'throughput': expected a positive number, got '-3'");
  EXPECT_EQ(error_of("unit", kPublishedHeader +
                                 std::string("resnet50,v100-sxm2-16gb,fp32,8,3,tokens/s,s,\n"))
                .rfind(":2: field 'unit': 'tokens/s'", 0),
            0u);
  EXPECT_EQ(error_of("batch",
                     kPublishedHeader + std::string("resnet50,v100-sxm2-16gb,fp32,0,3,img/s,s,\n")),
            ":2: field 'batch': expected a positive integer, got '0'");
  EXPECT_EQ(error_of("layout",
                     "config,platform,format,batch,throughput,unit,source,layout\n"
                     "resnet50,v100-sxm2-16gb,fp32,8,3,img/s,s,nwhc\n"),
            ":2: field 'layout': 'nwhc' (expected nhwc or nchw)");
}

// With layout=nchw, every convolution phase on a GPU in a half (or 8-bit) format gains the
// transposes of its activations, in and back (twice the activations it moves, at the
// streaming bandwidth), as separate kernels; nothing else changes, and fp32/tf32 convolutions
// and non-GPU descriptions pay nothing.
TEST(Simulate, NchwLayoutAddsTransposesAroundTensorCoreConvolutions) {
  const PlatformDescription gpu = find_platform("a100-sxm4-80gb");
  const Config c = parse_config("resnet50:batch=32");
  sim::SimOptions nchw;
  nchw.layout = "nchw";
  const auto a = sim::simulate_config(gpu, c, "amp-fp16");
  const auto b = sim::simulate_config(gpu, c, "amp-fp16", nchw);
  EXPECT_EQ(a.layout_s, 0);
  EXPECT_GT(b.layout_s, 0);
  EXPECT_NEAR(b.step_s, a.step_s + b.layout_s, 1e-12);
  const StepCost cost = step_cost(c);
  ASSERT_EQ(a.layers.size(), cost.layers.size() + 1);  // + the optimizer
  for (size_t i = 0; i < cost.layers.size(); ++i) {
    const LayerCost& l = cost.layers[i];
    const auto& lb = b.layers[i];
    const bool conv = l.op == "conv2d" || l.op == "gconv2d";
    double layout = 0;
    for (size_t j = 0; j < lb.phases.size(); ++j) {
      layout += lb.phases[j].layout_s;
      EXPECT_DOUBLE_EQ(lb.phases[j].memory_s, a.layers[i].phases[j].memory_s);
    }
    if (!conv) {
      EXPECT_EQ(layout, 0) << l.name;
      continue;
    }
    // fp32 cost (4 bytes) at 2 bytes: the activations are everything but the weights, which
    // each phase touches once (the stem convolution has no input gradient: two phases).
    const double phases = double(lb.phases.size());
    const double activations = (l.bytes_read + l.bytes_written - phases * l.params * 4) / 2;
    EXPECT_NEAR(layout, 2 * activations / b.bandwidth, 1e-9 * layout) << l.name;
  }
  // TF32 convolutions run on tensor cores in NHWC too; SIMT fp32 ones run as stored.
  EXPECT_GT(sim::simulate_config(gpu, c, "tf32", nchw).layout_s, 0);
  EXPECT_EQ(sim::simulate_config(gpu, c, "fp32", nchw).layout_s, 0);
  EXPECT_EQ(sim::simulate_config(accelerator(100, 100), c, "fp32", nchw).layout_s, 0);
  EXPECT_FALSE(sim::known_layout("nwhc"));
}

TEST(SimulateCli, AMalformedPublishedRowExits2WithOneLineAndTheShippedFileValidates) {
  const std::string bad = write_csv(
      "cli", kPublishedHeader + std::string("resnet50,v100-sxm2-16gb,fp32,8,0,img/s,s,\n"));
  const auto o = testing::run_cli("simulate --validate-published " + bad);
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find(":2: field 'throughput'"), std::string::npos) << o.err;
  std::remove(bad.c_str());
  const auto j = testing::run_cli("simulate --validate-published " + sim::shipped_published_path() +
                                  " --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["kind"], "trainbench.simulate.published");
  EXPECT_GE(doc["results"].size(), 3u);
  const auto t = testing::run_cli("simulate --validate-published " + sim::shipped_published_path());
  EXPECT_NE(t.out.find("median error"), std::string::npos) << t.out;
  // The rows measured on lent GPUs read the same way, and the phrase beside a TTA speedup
  // counts both kinds for a platform that has both.
  const auto m = testing::run_cli("simulate --validate-published " + sim::shipped_measured_path());
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.out.find("h200-sxm-141gb"), std::string::npos) << m.out;
  const std::string phrase = sim::validation_phrase("h200-sxm-141gb");
  EXPECT_NE(phrase.find("published rows"), std::string::npos) << phrase;
  EXPECT_NE(phrase.find("measured rows"), std::string::npos) << phrase;
  EXPECT_NE(sim::validation_phrase("v100-sxm2-16gb").find("published rows"), std::string::npos);
  EXPECT_NE(sim::validation_phrase("tpu-v2-board").find("not validated"), std::string::npos);
  // With a format: its own rows' error beside the platform's, or that no row checks it.
  const std::string eager = sim::validation_phrase("h200-sxm-141gb", "amp-fp8-eager@current");
  EXPECT_EQ(eager.find(phrase), 0u) << eager;
  EXPECT_NE(eager.find("; in amp-fp8-eager@current: median "), std::string::npos) << eager;
  // A margin changes no cost: the rows of the recipe check it.
  const std::string margin = sim::validation_phrase("h200-sxm-141gb", "amp-fp8-eager@current:1");
  EXPECT_NE(margin.find("; in amp-fp8-eager@current:1: median "), std::string::npos) << margin;
  const std::string te = sim::validation_phrase("h200-sxm-141gb", "amp-fp8@current");
  EXPECT_EQ(te, phrase + "; no row in amp-fp8@current");
}

// --explain splits the step by layer class and bound; the classes add up to the step less
// the overhead.
TEST(Simulate, ExplanationSplitsTheStepByClassAndBound) {
  PlatformDescription p = accelerator(10, 100, 64, 64);
  p.efficiency = curve({{16, 0.1}, {1024, 0.8}}, 2);
  const auto s = sim::simulate_config(
      p, parse_config("cnn:block=residual,filters=16,image=32,output=10,batch=8"));
  double sum = 0;
  std::set<std::string> classes;
  for (const auto& c : sim::explain(s)) {
    sum += c.time_s;
    classes.insert(c.op_class);
    EXPECT_NEAR(c.compute_bound_s + c.memory_bound_s, c.time_s, 1e-12 * s.step_s) << c.op_class;
    if (c.op_class == "conv") {
      EXPECT_GT(c.gemm_fraction, 0.09);
      EXPECT_LE(c.gemm_fraction, 0.8);
      EXPECT_GT(c.array_utilization, 0);
    }
  }
  EXPECT_NEAR(sum + s.overhead_s, s.step_s, 1e-9 * s.step_s);
  EXPECT_TRUE(classes.count("conv") && classes.count("optimizer") && classes.count("elementwise"));
  const std::string text = sim::format_explanation(s, p);
  EXPECT_NE(text.find("overhead"), std::string::npos) << text;
  EXPECT_NE(text.find("stated in the description"), std::string::npos) << text;
}

TEST(SimulateCli, UnknownPlatformAndFormatExit2WithOneLine) {
  const auto a = testing::run_cli("simulate fc:layers=2,nodes=64,batch=8 --platform no-such-accel");
  EXPECT_EQ(a.status, 2);
  EXPECT_NE(a.err.find("no-such-accel"), std::string::npos) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.err;
  const auto b = testing::run_cli(
      "simulate fc:layers=2,nodes=64,batch=8 --platform tpu-v2-board --format fp7x");
  EXPECT_EQ(b.status, 2);
  EXPECT_NE(b.err.find("fp7x"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
}

TEST(SimulateCli, JsonCarriesSchemaContextAndBreakdown) {
  const auto o = testing::run_cli(
      "simulate fc:layers=2,nodes=256,batch=64 --platform example-systolic-accelerator "
      "--format e4m3 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_TRUE(j.contains("context"));
  const auto& r = j["results"][0];
  EXPECT_EQ(r["format"]["peak_dtype"], "fp8");
  EXPECT_GT(r["step_s"].get<double>(), 0);
  EXPECT_TRUE(r["layers"][0]["phases"][0].contains("systolic"));
}

TEST(SimulateCli, EfficiencyInAFileShowsAsOverheadAndBadValuesExit2) {
  const std::string dir = ::testing::TempDir() + "/simeff-" + std::to_string(getpid());
  const std::string good = dir + "-good.json", bad = dir + "-bad.json";
  nlohmann::json j = described(
      {{"op_overhead_us", 10}, {"gemm", {{"fp32", {{{"n", 16}, {"fraction_of_peak", 0.1}}}}}}});
  std::ofstream(good) << j.dump();
  j["efficiency"]["op_overhead_us"] = -3;
  std::ofstream(bad) << j.dump();
  const auto o =
      testing::run_cli("simulate fc:layers=2,nodes=64,batch=8 --platform " + good + " --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto r = nlohmann::json::parse(o.out)["results"][0];
  EXPECT_NEAR(r["overhead_s"].get<double>(), r["operators"]["total"].get<double>() * 10e-6, 1e-12);
  EXPECT_GT(r["operators"]["optimizer"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(r["layers"][0]["phases"][0]["gemm_fraction"].get<double>(), 0.1);
  const auto t = testing::run_cli("simulate fc:layers=2,nodes=64,batch=8 --platform " + good);
  EXPECT_NE(t.out.find("overhead: "), std::string::npos) << t.out;
  const auto b = testing::run_cli("simulate fc:layers=2,nodes=64,batch=8 --platform " + bad);
  EXPECT_EQ(b.status, 2);
  EXPECT_NE(b.err.find("efficiency.op_overhead_us"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace tb
