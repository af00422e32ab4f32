#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tb {

inline constexpr int kPlatformSchemaVersion = 1;

// What a platform can do, in the one format shared by the registry of known platforms
// (platforms/*.json), a user's hypothetical accelerator, and this host's measured
// characterization. Documented field by field in docs/platforms.md.
struct PlatformDescription {
  std::string name;  // [a-z0-9._-]+
  std::string description;
  std::string kind;                           // cpu, gpu, tpu, accelerator
  std::string source;                         // where the numbers come from
  int cores = 0;                              // compute units sharing the memory (0: not stated)
  double memory_gb = 0;                       // capacity, 1e9 bytes
  double memory_bandwidth_gbps = 0;           // main memory (DRAM/HBM), 1e9 bytes/s
  std::map<std::string, double> peak_tflops;  // per dtype: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4
  // What the hardware runs a format it has no peak for as (a TPU: fp32 matrix products in
  // bf16): format or peak key -> a peak_tflops key. Without it such a format is refused.
  std::map<std::string, std::string> runs_as;
  std::map<std::string, double> cache_bandwidth_gbps;  // optional: l1, l2, l3
  struct Systolic {
    int rows = 0, cols = 0;
    std::string dataflow;  // weight-stationary, output-stationary
  };
  std::optional<Systolic> systolic_array;
  // How far below its roofs the platform runs in practice: measured by `trainbench
  // platform` for this host (micro-benchmarks, never the runs being predicted), optional in
  // a hand-written description. Without it the simulator is a pure roofline.
  struct GemmPoint {
    int64_t n = 0;                // square n x n x n GEMM
    double fraction_of_peak = 0;  // of peak_tflops[dtype], the fixed per-call cost excluded
  };
  struct Efficiency {
    double op_overhead_us = 0;  // per operator (forward, backward or optimizer) of a step
    // A GPU's host: the framework's time to dispatch one operator from the host thread. The
    // host queues kernels ahead of the GPU, so this overlaps the GPU's work, but a step takes
    // at least its operators x host_op_us. 0: not stated (the GPU's time alone).
    double host_op_us = 0;
    // A GPU's host, per training step whatever the model: the framework's fixed work (the
    // optimizer's Python, the autograd engine's start, zeroing the gradients). With
    // host_op_us, the host's time is host_step_us + operators x host_op_us. 0: not stated.
    double host_step_us = 0;
    // Per dtype: a GEMM whose operands' leading dimensions (a linear layer's input and output
    // features) are multiples of only `bytes` bytes (1, 2, 4 or 8; the key is that alignment)
    // runs at this fraction of the rate it has at 16-byte alignment: cuBLAS picks narrower-
    // access tensor-core kernels for it. A missing key below 16 bytes uses the next smaller
    // one stated (below all of them, the smallest stated); no entry for a dtype: no penalty.
    std::map<std::string, std::map<int, double>> gemm_alignment;
    // The share of memory_bandwidth_gbps that streaming kernels reach (STREAM's triad on a
    // GPU: 0.84-0.90 of the datasheet figure). 1 where the bandwidth is itself measured.
    double memory_fraction = 1;
    // Beyond op_overhead_us, per convolution phase (forward, backward-input, backward-weight):
    // the fixed time a convolution library spends on a call whatever its size.
    double conv_call_us = 0;
    std::map<std::string, std::vector<GemmPoint>> gemm;  // per dtype, ascending n
    // Per dtype: a linear layer's three GEMMs (x W^T, dY W, dY^T x) with `rows` rows (a
    // batch) and an n x n weight, as a fraction of the peak (the per-call floor excluded). A
    // batch of 64 against a wide layer is far from any square product: a CPU BLAS runs it at
    // close to its large-GEMM rate, where the square curve at the equivalent n says half of
    // that. Where a dtype has them, a GEMM's fraction comes from these (gemm_shape_fraction).
    struct RowsPoint {
      int64_t rows = 0, n = 0;
      double fraction_of_peak = 0;
    };
    std::map<std::string, std::vector<RowsPoint>> gemm_rows;  // per dtype, by rows then n
    // Per dtype, ascending n: convolutions (3x3, forward and both backward passes) keyed by
    // their im2col GEMM's equivalent square n. Where a dtype has none, convolutions use gemm.
    std::map<std::string, std::vector<GemmPoint>> conv;
    // Per dtype, by rows then n: convolutions (3x3, C = K = n channels, forward and both
    // backward passes) whose output has `rows` positions (batch x height x width), on the
    // threads a run uses, as a fraction of the peak (the fixed time per call excluded). Small
    // maps and few channels thread poorly, which the conv curve (one core's rate, scaled to
    // the cores) does not see. Where a dtype has them, a dense convolution's fraction comes from
    // here (conv_shape_fraction).
    std::map<std::string, std::vector<RowsPoint>> conv_rows;
    // Per layer op whose work is elementwise (batchnorm, maxpool, avgpool, relu, add):
    // nanoseconds per element of its largest tensor, forward + backward, at 4 bytes per
    // element. Where it exceeds the roofline, the layer takes this long instead.
    std::map<std::string, double> op_ns_per_element;
    // Per recurrent cell (rnn, lstm, gru): microseconds per time step, forward + backward, of
    // the operators and autograd nodes a framework runs for one step of a cell, whatever its
    // size. Where a cell has it, the simulator adds it per time step in place of counting
    // the step's operators at op_overhead_us.
    std::map<std::string, double> cell_step_us;
    // Per dtype of the parameters, per optimizer (sgd, momentum, adam, adamw, rmsprop as
    // configs spell them): nanoseconds per parameter of one LibTorch optimizer step, on the
    // threads a run uses. A CPU's update loops over the parameters, each pass an operator
    // whose time is arithmetic and conversion more than bytes (a bfloat16 update takes as long
    // as a float32 one there); where the description has it, the optimizer takes at least this.
    std::map<std::string, std::map<std::string, double>> optimizer_ns_per_param;
    // The bandwidth a streaming update (x = 0.5 x + 0.5) reaches over a working set of `bytes`,
    // ascending: where caches end and main memory begins. Where the description has it, a
    // CPU's measured optimizer rate (taken over kOptimizerMeasuredParams parameters) is scaled
    // to a step's own working set by the ratio of the two sets' bandwidths.
    struct WorkingSetPoint {
      double bytes = 0, gbps = 0;
    };
    std::vector<WorkingSetPoint> working_set;
    // Per recurrent cell: nanoseconds per gate element (batch x gates x hidden) per time step of
    // the cell's elementwise work, forward + backward (gate activations, the state update and
    // their gradients), beyond cell_step_us's per-step operators. Added per time step.
    std::map<std::string, double> cell_ns_per_element;
    // Per elementwise layer op (batchnorm, maxpool, avgpool, relu, add): microseconds per call,
    // forward and backward, of such a layer reading `elements` elements, on the threads a run
    // uses. op_ns_per_element's rate is one core's over 131072 elements, where a call's fixed
    // part (ATen's sub-operators, the parallel regions it opens on every call, its autograd
    // nodes) is spread thin; in a small model that part is most of the layer. The simulator
    // adds what is left of it after `elements` at op_ns_per_element and the operators it
    // counts at op_overhead_us.
    struct LayerCall {
      double forward = 0, backward = 0, elements = 0;
    };
    std::map<std::string, LayerCall> layer_call_us;
    // Per recurrent cell: the whole layer's time per time step, forward + backward (its GEMMs
    // in the loop, the gates, the gradient's accumulation over the steps, the input's
    // gradient), in fp32 with input width = hidden, on a grid of hidden x batch sizes: what
    // DeepBench's RNN tables are for a GPU. Where a fp32 layer's sizes lie on the grid, the
    // simulator takes its time from here (log-log between the points) in place of its GEMMs,
    // cell_step_us and cell_ns_per_element.
    struct CellStepPoint {
      int64_t hidden = 0, batch = 0;
      double us = 0;
    };
    std::map<std::string, std::vector<CellStepPoint>> cell_step_table;  // by hidden, then batch
    // Per dtype: the output tiles (rows x cols of C) one compute unit (`cores`: a GPU's SMs)
    // works on at a time, those a GEMM library picks among. Where a dtype has them, its gemm
    // and conv curves are per-unit efficiencies with wave quantization taken out, and a GEMM
    // runs at curve x wave_utilization (below).
    struct Tile {
      int64_t rows = 0, cols = 0;
    };
    std::map<std::string, std::vector<Tile>> gemm_tiles;
  };
  std::optional<Efficiency> efficiency;
  nlohmann::json extra =
      nlohmann::json::object();  // everything else in the file (measurements, machine, ...), kept

  // Peak FLOP/s for a dtype, if the description states one.
  std::optional<double> peak_flops(const std::string& dtype) const;
  double bandwidth() const { return memory_bandwidth_gbps * 1e9; }  // bytes/s
  // FLOPs per byte at which the dtype's compute roof meets the memory roof.
  std::optional<double> ridge(const std::string& dtype) const;
  // The roofline: attainable FLOP/s at an arithmetic intensity (FLOPs/byte).
  std::optional<double> attainable(const std::string& dtype, double intensity) const;
  // The achieved fraction of the dtype's peak for a square GEMM of size n: log-log
  // interpolation between the stated points, clamped at both ends; 1 without a curve.
  double gemm_fraction(const std::string& dtype, double n) const;
  // The fraction for an M x N x K product (M x K times K x N): from gemm_rows where the dtype
  // has them, keyed by the smallest dimension (s) and the harmonic mean of the other two (L):
  // each measured row count's curve read at L, log-log between the row counts around s, and
  // between the largest row count and the square curve at L (the product is square when s
  // reaches L); clamped below the smallest row count. Elsewhere the square curve at
  // equivalent_square_n(M, N, K).
  double gemm_shape_fraction(const std::string& dtype, double m, double n, double k) const;
  // The same for a convolution, from the conv curve where the dtype has one.
  double conv_fraction(const std::string& dtype, double n) const;
  // A dense convolution whose im2col GEMM is M x N x K (M output positions, N output channels,
  // K = input channels x kernel area): from conv_rows where the dtype has them, read at rows M
  // and n = sqrt(N K / 9) (a 3x3 convolution's channels where C = K; the same work per output
  // position otherwise), each row count's curve log-log over n, log-log between the row counts,
  // clamped at every edge; past the table (more rows than its largest row count, or more
  // channels than were measured at the row counts around M: shapes left out for their size)
  // the higher of that and conv_fraction at the equivalent square n. Elsewhere conv_fraction.
  // The points must be sorted by rows, then n (sort_by_rows), as a parsed description's are.
  double conv_shape_fraction(const std::string& dtype, double m, double n, double k) const;
  // The gemm_alignment factor for a GEMM in `dtype` (elements of elem_bits) whose leading
  // dimensions are `dims`: 1 where every one is 16-byte aligned or the dtype has no entry.
  // Dimensions under kThinGemmDim elements are left out.
  static constexpr int64_t kThinGemmDim = 16;
  double alignment_fraction(const std::string& dtype, int64_t elem_bits,
                            std::initializer_list<int64_t> dims) const;
  // Wave quantization: the share of the `cores` x tile capacity that `count` independent
  // m x n outputs (reducing over k) keep busy, count x m x n x s / (waves x cores x tile rows x
  // tile cols), with waves = ceil(tiles x s / cores), on the tile and the split of k into s
  // slices (1, 2, 4, 8 or 16, each at least kMinSplitK deep) that keep most of it busy: a
  // library's heuristic, which splits k when the output alone leaves units idle. 1 where the
  // dtype states no tiles or `cores` is 0.
  double wave_utilization(const std::string& dtype, double m, double n, double k,
                          double count = 1) const;
  static constexpr double kMinSplitK = 128;
  // The working_set curve read at `bytes`: log-log between its points, clamped at its ends;
  // 0 without a curve.
  double working_set_gbps(double bytes) const;
  // cell_step_table read at (hidden, batch): bilinear in log hidden and log batch on log time;
  // 0 where the cell has no table or the sizes lie outside it.
  double cell_step_table_us(const std::string& cell, double hidden, double batch) const;
};

// The parameters over which `trainbench platform` measures optimizer_ns_per_param: four
// 512 x 1024 tensors, a training step's weight matrices' order of size.
inline constexpr double kOptimizerMeasuredParams = 4.0 * 512 * 1024;
// ATen's at::internal::GRAIN_SIZE: an elementwise operator over fewer elements runs on one
// thread.
inline constexpr double kAtenGrainElements = 32768;

// The edge n of the square GEMM with the same arithmetic intensity as (M x K)(K x N),
// 3MNK / (MK + KN + MN): n for a square one, less for a thin one, which runs as slowly as
// a small square one does. The efficiency curves are keyed by it.
double equivalent_square_n(double m, double n, double k);

// Rows-table points (gemm_rows, conv_rows) in the order a parsed description holds them: by
// rows, then n.
void sort_by_rows(std::vector<PlatformDescription::Efficiency::RowsPoint>& points);

// Validates and reads a description. `origin` (a file name) starts every error
// message, which names the offending field: "tpu.json: field 'peak_tflops.bf16': ...".
PlatformDescription parse_platform(const nlohmann::json& j, const std::string& origin);
PlatformDescription load_platform_file(const std::string& path);
nlohmann::json to_json(const PlatformDescription& p);

// Where a config lands on a platform's roofline.
struct RooflinePlacement {
  std::string platform, dtype;
  double peak_flops = 0, bandwidth = 0, ridge = 0;
  double intensity = 0, attainable = 0, achieved = 0;
  bool memory_bound = false;
  double fraction_of_roof() const { return attainable > 0 ? achieved / attainable : 0; }
};
std::optional<RooflinePlacement> place_on_roofline(const PlatformDescription& p,
                                                   const std::string& dtype, double intensity,
                                                   double achieved_flops);

}  // namespace tb
