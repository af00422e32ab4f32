#pragma once
// The simulation phase (divide and conquer, step 2): the time of one training step on a
// described accelerator, predicted from the cost model's FLOPs and bytes, never measured.
// Per layer and phase: max(FLOPs / (peak x mapping efficiency), bytes / bandwidth), the
// mapping efficiency being that of the layer's GEMMs on the systolic array when the
// description has one, times the achieved fraction of peak its `efficiency` states for the
// GEMM's size; plus a fixed cost per framework operator when it states one. Conventions in
// docs/numerics.md ("Simulation phase").
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "platform/description.h"

namespace tb::sim {

// A GEMM (M x K) x (K x N) on a rows x cols array. Weight-stationary: K on rows, N on
// columns, the M rows of the input stream through; output-stationary: M on rows, N on
// columns, the K terms stream through. Each fold takes
//   fill (rows - 1 + cols - 1: the operand skew reaches the far corner)
//   + the streamed dimension
//   + rows (weights loaded before the fold, or results shifted out after it)
// cycles (SCALE-Sim's 2R + C + T - 2).
struct SystolicMapping {
  int64_t folds = 0;
  int64_t fold_cycles = 0, fill_cycles = 0, drain_cycles = 0, stream_cycles = 0;
  double cycles = 0;       // folds x fold_cycles x count
  double utilization = 0;  // useful MACs / (rows x cols x cycles)
};
SystolicMapping map_gemm(int64_t m, int64_t n, int64_t k, int64_t count,
                         const PlatformDescription::Systolic& array);

// The number format the accelerator computes and stores in, and which of its peaks that
// uses. A pure format (fp32, bf16, e4m3, ...) runs everything in it. A mixed-precision recipe
// runs as frameworks run it: `amp-fp16` / `amp-bf16` (automatic mixed precision) the matrix
// products and convolutions on the half format's peak with activations stored in it, other
// arithmetic at the fp32 peak, weights, gradients and optimizer state in fp32 with the
// weights cast to the half format once a step; `tf32` the matrix products on the tf32 peak,
// everything else fp32. `note` says when the description's `runs_as` chose the peak.
struct SimFormat {
  std::string name;              // as given: fp32, bf16, e4m3, amp-fp16, tf32, fixed:w=8,f=4, ...
  double bits = 32;              // activations' storage, per element, block scales amortized
  std::string peak_dtype;        // the peak_tflops key of the matrix products
  std::string other_peak_dtype;  // of everything else: = peak_dtype for a pure format
  double state_bits = 32;        // weights, gradients, optimizer state: = bits for a pure format
  bool mixed = false;            // a recipe (amp-*, tf32) rather than a pure format
  std::string note;
  // A scaling recipe's own passes over each GEMM input (`FORMAT@SCALING`, or NVFP4's tensor
  // amax): reads of the 16-bit tensor the scale comes from, before the cast. Current scaling
  // and NVFP4: 1; delayed scaling (amax fused into the cast) and per-block scales: 0.
  std::string scaling;  // the recipe's text after '@', "" for none
  double amax_passes = 0;
  // A mixed FP8 recipe (`amp-fp8@current`, `amp-fp8@delayed`, `amp-fp8-eager@current`):
  // amp-bf16, except that the GEMMs of linear layers whose rows and features are multiples
  // of 16 (cuBLASLt's fp8 layouts need them), a language model's output projection
  // (`lm_head`) excepted, run at this peak. Each such GEMM input (x and W forward, dY
  // backward) is cast per tensor by separate kernels: fp8_cast_bytes and fp8_cast_ops.
  std::string linear_peak_dtype;
  bool eager_casts = false;  // ATen's kernels one by one, as PyTorch runs the recipe in eager
};
// Bytes moved and operators dispatched to cast one element (bytes) or one tensor (operators)
// of a `source_bytes`-wide tensor to fp8 under the recipe, its transposed copy included.
double fp8_cast_bytes(const SimFormat& f, double source_bytes);
double fp8_cast_ops(const SimFormat& f, double source_bytes);
// The recipes' names: amp-fp16, amp-bf16, tf32, amp-fp8@current, amp-fp8@delayed,
// amp-fp8-eager@current.
const std::vector<std::string>& recipe_names();
// Throws UsageError for an unknown format, or one the description states no peak for (nor
// what the hardware runs it as: `runs_as`), naming the platform, the format and its peaks.
SimFormat resolve_format(const PlatformDescription& p, const std::string& format);

struct PhaseTime {
  std::string phase;  // forward, backward-input, backward-weight, optimizer
  double flops = 0, matmul_flops = 0, bytes = 0;
  double compute_s = 0, memory_s = 0;
  std::optional<SystolicMapping> mapping;  // the phase's GEMM, on a systolic array
  // Of the peak: the description's GEMM (or convolution) curve at the layer's size, times the
  // phase's wave utilization where the description states GEMM tiles.
  double gemm_fraction = 1;
  // Separate transpose kernels before and after the phase (SimOptions::layout), so added to
  // the phase rather than overlapped with it.
  double layout_s = 0;
  // The scaling recipe's amax passes over the phase's GEMM inputs (SimFormat::amax_passes):
  // separate kernels too.
  double scale_s = 0;
  double time_s() const { return std::max(compute_s, memory_s) + layout_s + scale_s; }
  bool memory_bound() const { return memory_s > compute_s; }
};

struct LayerTime {
  std::string name, op;
  std::vector<PhaseTime> phases;
  // > 0: a recurrent layer timed from the description's cell_step_table, per time step.
  double step_us = 0;
  double time_s() const;
};

// The framework operators one training step dispatches, estimated from the cost model
// (docs/numerics.md): a layer is one forward operator (a recurrent layer, its cell's
// operators per time step) and one backward operator per gradient it computes; each
// parameter tensor (weight and bias: 2 per layer with parameters, 4 for a recurrent one)
// adds its gradient accumulation, its zeroing and the optimizer's in-place updates.
struct OpCount {
  double forward = 0, backward = 0, optimizer = 0;
  // Under a mixed-precision recipe: autocast casts each parameter tensor of a GEMM layer to
  // the half format in forward and its gradient back in backward (2 per tensor).
  double casts = 0;
  // Under a mixed FP8 recipe: the casts of the fp8 GEMMs' inputs (SimFormat::linear_peak_dtype).
  double fp8_casts = 0;
  double total() const { return forward + backward + optimizer + casts + fp8_casts; }
};
// A recurrent cell named in `cell_step_us` (the description's measured time per step) counts
// as one operator per phase: its steps are timed apart. multi_tensor (GPU descriptions): the
// optimizer as torch.optim runs it on CUDA, one foreach launch per pass over all tensors and
// the gradients set to None rather than zeroed.
OpCount count_operators(const StepCost& cost,
                        const std::map<std::string, double>& cell_step_us = {},
                        bool multi_tensor = false);
using tb::equivalent_square_n;  // platform/description.h

struct Simulation {
  std::string platform, config;
  SimFormat format;
  double peak_flops = 0, bandwidth = 0;
  double stated_bandwidth = 0;    // the description's; `bandwidth` is its attainable share
  double other_peak_flops = 0;    // of the arithmetic off the matrix units (= peak_flops: pure)
  std::vector<LayerTime> layers;  // in forward order; the optimizer is one more "layer"
  double step_s = 0;              // the phases' sum plus overhead_s
  double compute_bound_s = 0, memory_bound_s = 0;  // step time in phases of each bound
  OpCount ops;
  double op_overhead_s = 0;                 // per operator, from the description (0: none stated)
  double conv_phases = 0, conv_call_s = 0;  // convolution phases x the description's conv_call_us
  // Recurrent time steps of cells whose step time the description states, and their time.
  double cell_steps = 0, cell_steps_s = 0;
  // Recurrent cells' gate elements over all time steps, and their time (cell_ns_per_element).
  double cell_elements = 0, cell_elements_s = 0;
  // Recurrent layers timed from the description's cell_step_table (their per-step operators
  // and gate elements are in that time).
  std::set<std::string> table_layers;
  // Elementwise layers with a measured fixed time per call (the description's layer_call_us),
  // and that time beyond their elements and counted operators.
  double layer_calls = 0, layer_calls_s = 0;
  // ops.total() x op_overhead_s + conv_phases x conv_call_s + cell_steps_s + cell_elements_s
  // + layer_calls_s
  double overhead_s = 0;
  // The host's time per step, host_step_us + ops.total() x host_op_us (the description's): it
  // overlaps the device's work, and the step is the longer of the two (host_bound).
  double host_s = 0, host_step_s = 0;
  bool host_bound = false;
  std::string layout = "nhwc";  // SimOptions::layout
  double layout_s = 0;          // the phases' layout_s
  double scale_s = 0;           // the phases' scale_s
  // Under a mixed FP8 recipe: the linear layers whose GEMMs run in fp8, and the part of
  // scale_s that casts their inputs.
  int64_t fp8_layers = 0;
  double fp8_cast_s = 0;
  std::map<std::string, double> phase_s;  // per phase
  // The step by the phases a run measures (forward, backward, optimizer: timing.phases_s),
  // the fixed costs put where they happen: operators and convolution calls by phase, casts
  // half forward, a recurrent cell's and an elementwise layer's calls by their measured or the
  // layer's forward share. Sums to step_s; empty where the host's dispatch bounds the step.
  std::map<std::string, double> phase_total_s;
  double memory_bytes = 0, capacity_bytes = 0;  // per worker with data parallelism
  // Data-parallel workers (the config's `workers`) and ZeRO stage: the bytes each worker sends
  // per step, at the format's width (cost.h's DataParallelCost). Not in step_s: descriptions
  // state no interconnect.
  int64_t workers = 1;
  int zero = 0;
  double comm_bytes_ideal = 0, comm_bytes_run = 0;
  std::string status = "ok";  // ok or oom-predicted
  // What bounds the step: host (the host's dispatch is longer than the device's work),
  // overhead (the fixed per-operator costs exceed either roof's phases), memory or compute.
  const char* bound() const;
};

struct SimOptions {
  // Fraction of the peak available: a CPU run on `threads` of `cores` cores gets that share.
  double peak_share = 1;
  // The activations' memory layout. "nhwc" (channels last): convolutions run as stored.
  // "nchw" (PyTorch's default): on a GPU, cuDNN runs TF32, half- and 8-bit convolutions on tensor
  // cores in NHWC and transposes every activation a convolution phase reads and writes, in
  // and back, with kernels of their own: each phase moves its activations twice more.
  std::string layout = "nhwc";
};
// The layouts SimOptions::layout takes.
bool known_layout(const std::string& layout);

// `cost` is at the config's dtype (`config_elem_bytes` per element); bytes are rescaled to
// the format's width.
Simulation simulate_step(const PlatformDescription& p, const StepCost& cost,
                         double config_elem_bytes, const SimFormat& f, const SimOptions& o = {});
// The config's cost at `format` when given; else at its `numerics=` policy's compute format
// where it has one (NumericsPolicy::compute_format); else at its own dtype.
Simulation simulate_config(const PlatformDescription& p, const Config& config,
                           const std::string& format = "", const SimOptions& o = {});

// `simulate --explain`: the step split by layer class (matmul, conv, recurrent, attention,
// elementwise, optimizer) and bound (compute, memory; overhead apart), with the peak, the
// GEMM efficiency and the array utilization each class used and where they come from.
struct ClassTime {
  std::string op_class;
  double time_s = 0, compute_bound_s = 0, memory_bound_s = 0;
  double flops = 0, bytes = 0;
  double gemm_fraction = 0;      // time-weighted over its matrix-product phases (0: none)
  double array_utilization = 0;  // the same, on a systolic array (0: none)
};
std::vector<ClassTime> explain(const Simulation& s);
std::string format_explanation(const Simulation& s, const PlatformDescription& p);
nlohmann::json explanation_json(const Simulation& s, const PlatformDescription& p);

nlohmann::json to_json(const Simulation& s, size_t top_layers = 10);
std::string format_simulation(const Simulation& s, size_t top_layers = 10);

}  // namespace tb::sim
