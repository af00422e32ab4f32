#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "platform/host.h"

namespace tb {

// One quantity measured several times: every trial kept, best and median derived.
struct Trials {
  std::vector<double> values;
  double best() const;  // the largest (rates) value
  double median() const;
};

struct GemmSize {
  int64_t n = 0;  // square n x n x n
  Trials gflops;
};
struct GemmMeasurement {
  std::string dtype;
  std::vector<GemmSize> sizes;
  int64_t best_n = 0;
  double best_gflops = 0;
};

// LibTorch's own matrix product (torch::mm) on square matrices of each size: warm-up
// calls excluded, then `trials` timed windows of at least `trial_s` seconds each.
GemmMeasurement measure_gemm(const std::string& dtype, const std::vector<int64_t>& sizes,
                             int trials, double trial_s);

// A linear layer's three GEMMs as a training step runs them (forward x W^T, dX = dY W,
// dW = dY^T x) with `rows` rows and an n x n weight, for each pair of `rows` and `sizes`: the
// thin products of fully connected and recurrent layers at a batch, which no square size
// stands for. Warm-up calls excluded, then `trials` windows of at least `trial_s` seconds.
struct RowsGemm {
  int64_t rows = 0, n = 0;
  double flops = 0;  // per call of the three: 3 x 2 x rows x n x n
  Trials gflops;
};
// Calls per second of each of `steps`, in `trials` rounds that run every step once each (a
// window of about `trial_s`, its call count set from two warm-up calls, one more untimed call
// first where the window holds several): per step, one rate per round. Round after round
// rather than step after step: on a shared VM a slow spell of several seconds (a neighbour, a
// vCPU taken away) then lands on one round of every step, which a median over rounds
// discards, instead of on every trial of the steps measured during it (a GEMM curve measured
// size after size can come out at half the rate over a run of middle sizes and whole at the
// largest); the untimed call keeps the steps measured before from leaving the window cold
// caches.
std::vector<std::vector<double>> calls_per_second_interleaved(
    const std::vector<std::function<void()>>& steps, int trials, double trial_s);

// GFLOP/s of one float32 n x n GEMM over `window_s` on the run's threads (the best of three
// windows): the same
// kernel timed at several points of a long measurement tells whether the machine's speed
// stayed put meanwhile.
double gemm_rate_now(int64_t n, double window_s);

std::vector<RowsGemm> measure_rows_gemm(const std::string& dtype, const std::vector<int64_t>& rows,
                                        const std::vector<int64_t>& sizes, int trials,
                                        double trial_s);
// Per point, the median time of the three calls less 3 x `floor_us` as a fraction of
// `peak_gflops` (clamped at 1); points shorter than twice their floor are left out, as in
// efficiency_curve. Returns (rows, n, fraction).
struct RowsFraction {
  int64_t rows = 0, n = 0;
  double fraction = 0;
};
std::vector<RowsFraction> rows_gemm_fractions(const std::vector<RowsGemm>& points,
                                              double peak_gflops, double floor_us);

// Convolutions as a training step runs them: 3x3, stride 1, padding 1, batch 16 on 16x16
// maps, C = K channels, forward and both backward passes, after warm-up calls.
struct ConvShape {
  int64_t channels = 0;
  double n = 0;      // equivalent square n of the im2col GEMM (M = 16 * 16 * 16, N = C, K = 9C)
  double flops = 0;  // per forward + backward: 3 x 2 x M x N x K
  Trials gflops;
};
struct ConvMeasurement {
  std::string dtype;
  std::vector<ConvShape> shapes;
};
ConvMeasurement measure_conv(const std::string& dtype, const std::vector<int64_t>& channels,
                             int trials, double trial_s);
// The same convolutions on the threads a run uses, over a grid of output rows (M = batch 8 x
// side x side positions) and channels: what a small model's convolutions get from the library's
// threading, which the one-core curve above leaves out (on 2 cores a 16-channel 3x3 convolution
// on 16x16 maps ran 1.5x its one-core rate, and its 1x1 form 4x slower). Shapes whose forward +
// backward exceeds kConvGridMaxFlops are not measured: they are at the curve's top.
inline constexpr double kConvGridMaxFlops = 1.5e9;
struct ConvGridPoint {
  int64_t rows = 0, channels = 0;
  double flops = 0;  // per forward + backward: 3 x 2 x M x C x 9C
  Trials gflops;
};
std::vector<ConvGridPoint> measure_conv_grid(const std::string& dtype,
                                             const std::vector<int64_t>& sides,
                                             const std::vector<int64_t>& channels, int trials,
                                             double trial_s);
// As rows_gemm_fractions: per point, its median time less `floor_us` as a fraction of
// `peak_gflops` (clamped at 1), points shorter than twice the floor left out. (rows, channels
// as n, fraction).
std::vector<RowsFraction> conv_grid_fractions(const std::vector<ConvGridPoint>& points,
                                              double peak_gflops, double floor_us);
// The fixed time of a convolution's forward + backward (microseconds, per trial): a 3x3
// convolution too small to compute anything (batch 16, 8 channels, 2x2), on the threads a run
// uses, so the cost of starting a parallel convolution is in it.
Trials measure_conv_floor(const std::string& dtype, int trials, double trial_s);
// Per shape, the median rate's fraction of `peak_gflops` once `floor_us` per call (the
// operators' fixed cost, which the simulator adds separately) is taken out.
std::vector<std::pair<int64_t, double>> conv_fractions(const ConvMeasurement& m, double peak_gflops,
                                                       double floor_us);

// Layers whose work is elementwise, forward + backward on a float32 batch of 32 x 16 x 16 x 16
// (batchnorm, maxpool 3x3 stride 2, global avgpool, relu, add, a depthwise 3x3 convolution
// gconv2d; softmax_xent on the same elements as 512 x 256 logits): nanoseconds per element of
// the layer's largest tensor, per op name as the cost model spells it.
std::map<std::string, Trials> measure_elementwise_ops(int trials, double trial_s);

// The same layers' fixed time per call as a small model calls them (batchnorm, maxpool 3x3
// stride 2, global avgpool, relu, add; float32 kLayerCallShape), on the threads a run uses:
// chains of 2 and 10 such layers in alternating windows, forward timed apart from backward
// (through freeing the graph), the difference over the 8 extra layers, in microseconds per
// layer. What a call costs besides its elements (the operators inside it, the parallel
// regions it opens, its autograd nodes) is in it; the simulator takes the per-element time
// of `elements` (what the extra layers read) and the operators it counts out.
inline constexpr int64_t kLayerCallShape[] = {16, 8, 4, 4};
struct LayerCallTrials {
  Trials forward, backward;
  double elements = 0;
};
std::map<std::string, LayerCallTrials> measure_layer_calls(int trials, double trial_s);

// Recurrent cells (rnn, lstm, gru) as LibTorch's CPU layers run them, one time step after
// another: microseconds per time step, forward + backward, of a cell too small to compute
// anything (width 8, batch 1), on the threads a run uses. The operators, views and autograd
// nodes of a step are what this measures; the simulator adds it per time step.
std::map<std::string, Trials> measure_cell_steps(int trials, double trial_s);

// The same cells' elementwise work per time step (gate activations, the state update, their
// gradients), as LibTorch 1.13's CPU cells run it after the two gate GEMMs
// (aten/src/ATen/native/RNN.cpp: SimpleCell, LSTMCell, GRUCell): nanoseconds per gate element
// (batch x gates x hidden), forward + backward, on the threads a run uses. Batch 32 at hidden
// 64 and 192, the difference over the added elements: the per-operator cost cancels.
std::map<std::string, Trials> measure_cell_elementwise(int trials, double trial_s);

// The same layers whole, as a model runs them (input width = hidden, the input's gradient
// taken, fp32), per time step, forward + backward, at lengths 4 and 16, on a grid of hidden x
// batch sizes: a layer in a training step does more than its parts (the weight gradient
// added into the last at every time step, the framework's per-step work between the GEMMs),
// which a model of the parts misses. Microseconds per time step, per cell.
// Hidden sizes a factor of 2 apart: a layer's time per step is convex in log hidden (fixed
// costs, then the GEMMs' square law); log-log between points 4x apart overshot the measured
// midpoints (hidden 64 and 256) by 8-16% for most cells and batches, 27% at worst.
inline constexpr int64_t kCellTableHidden[] = {32, 64, 128, 256, 512};
inline constexpr int64_t kCellTableBatch[] = {8, 32, 128};
struct CellStepTime {
  int64_t hidden = 0, batch = 0;
  Trials us;
};
std::map<std::string, std::vector<CellStepTime>> measure_cell_step_table(int trials,
                                                                         double trial_s);

// One LibTorch optimizer step (make_optimizer's, per `optimizer` config value) over 2M
// parameters of `dtype` in four 512 x 1024 tensors, gradients set, on the threads a run uses:
// nanoseconds per parameter, per optimizer. `dtype`: fp32 or bf16 (others: none).
std::map<std::string, Trials> measure_optimizer_steps(const std::string& dtype, int trials,
                                                      double trial_s);

// The fixed cost of a framework operator, which the simulator adds per operator of a step
// while the GEMM curve keeps only what scales with the work (docs/platforms.md).
struct OverheadMeasurement {
  int chain = 0;       // tiny operators per timed forward + backward
  Trials mm_call_us;   // torch::mm_out on 1 x 1 matrices, no autograd: the GEMM floor
  Trials forward_us;   // per operator recorded by autograd, 8-element tensors
  Trials backward_us;  // per autograd node run by backward()
  // Per operator of a training step: forward and backward operators averaged.
  double op_overhead_us() const { return (forward_us.median() + backward_us.median()) / 2; }
};
// `trials` timed windows of at least `trial_s` seconds each, after a warm-up.
OverheadMeasurement measure_overhead(int trials, double trial_s);

// One measured point of an efficiency curve: its key n, FLOPs per call, median GFLOP/s.
struct RatePoint {
  double n = 0, flops = 0, gflops = 0;
};
// Per point, the time per call less `floor_us` as a fraction of `peak_gflops` (clamped at 1);
// points whose call is shorter than twice the floor (what is left would be smaller than the
// floor's own uncertainty), or whose rounded n does not increase, are left out.
std::vector<std::pair<int64_t, double>> efficiency_curve(const std::vector<RatePoint>& points,
                                                         double peak_gflops, double floor_us);

// Per GEMM size, the median rate's fraction of `peak_gflops` once `floor_us` (the fixed
// cost of one call) is taken out of each call's time; sizes whose call is shorter than
// twice the floor are left out. Clamped at 1 (the peak is the best trial, a point the median).
std::vector<std::pair<int64_t, double>> gemm_fractions(const GemmMeasurement& g, double peak_gflops,
                                                       double floor_us);

struct StreamMeasurement {
  int64_t elements = 0;            // per array, doubles
  Trials copy, scale, add, triad;  // GB/s, STREAM's byte counting
  bool validated = false;
  std::string validation;
};

// STREAM (McCalpin) copy, scale, add and triad on three double arrays of `elements`
// each, multi-threaded with LibTorch's thread pool, results checked as STREAM does.
StreamMeasurement measure_stream(int64_t elements, int trials);

struct WorkingSetPoint {
  int64_t bytes = 0;  // total working set over all threads
  Trials gbps;
};

// ERT-style sweep: each thread repeatedly updates its own share of a working set
// (x = x * a + b: 16 bytes moved per element), from L1-sized to beyond the last level.
std::vector<WorkingSetPoint> measure_working_sets(int64_t min_bytes, int64_t max_bytes, int trials,
                                                  double trial_s);

// Bandwidth per cache level from a sweep: the median rate over working sets that fit
// in half that level (all instances) and not in the level below.
std::vector<std::pair<std::string, double>> cache_bandwidths(
    const HostInfo& host, const std::vector<WorkingSetPoint>& sweep);

struct TheoreticalPeak {
  std::string dtype;
  double flops = 0;
  std::string formula;
  // Both the microarchitecture (its FLOPs per cycle) and the clock limit were read from this
  // CPU. Otherwise the figure is an estimate and `caveat` says what is not known.
  bool verified = false;
  std::string caveat;
};
// cores x clock x FLOPs per cycle per core. FLOPs per cycle come from the microarchitecture
// (platform/microarchitecture.h) or, where it is unknown or `fma_units` > 0 is given, from the
// SIMD flags: FMA units x lanes x 2. The clock is cpufreq's maximum (turbo) where readable,
// so a measured rate stays below it; else the nominal clock, and the peak is unverified.
std::vector<TheoreticalPeak> theoretical_peaks(const HostInfo& host, int fma_units);

}  // namespace tb
