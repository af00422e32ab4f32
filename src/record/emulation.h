#pragma once
// An emulation result as the results store and `trainbench emulate --json` keep it: the
// options, one object per seed and their summary. What was emulated (the policy) is described by
// emulation/descriptor.h.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tb {
namespace emu {

struct EmulationOptions {
  std::string model = "mlp";  // mlp: 784-256-128-10; cnn: 2 x (conv5x5, act, pool) + linear
  int64_t batch = 64;
  // 0: the task's: SGD's 0.05 with momentum (Fashion-MNIST), AdamW's (the language task,
  // emulation/language_training.h)
  double lr = 0, momentum = 0.9;
  // Every 25 iterations: at most 2% of the fp32 MLP's ~3000 iterations to the default target.
  int64_t eval_every = 25;
  // What rounding did (ScalingSample) is counted on every count_every-th step, one sample per
  // counted step; 0: on the step before each evaluation only, since counting costs more than
  // rounding. It changes no rounding: results are the same either way.
  int64_t count_every = 0;
  int64_t max_iters = 10000;
  // The first N test images (0: all 10000), or N held-out windows of text (0: the language
  // task's default, emulation/language_training.h)
  int64_t eval_examples = 0;
  // Near where the fp32 MLP's accuracy flattens (about 0.87 after 6000 iterations).
  double target = 0.86;  // test accuracy
  // The data: fashion-mnist, or the text corpus gcide (emulation/text_corpus.h), whose runs
  // end at a validation loss (nats per byte) at or below target_loss instead; 0: no loss
  // target (accuracy).
  std::string dataset = "fashion-mnist";
  double target_loss = 0;
  int seeds = 5;
  uint64_t first_seed = 1;
  int threads = 0;  // 0: all cores; the caller applies it (runner/threads.h) before emulate()
};

// What one rounding point did on one counted step (EmulationOptions::count_every): how many
// values it rounded, how many of them (after scaling) were beyond the format's largest finite
// value, how many nonzero values became zero, how many were NaN or Inf, the largest amax, and
// the scales used.
struct ScalingSample {
  std::string point;      // w, a, e, g, o, m, or KEY.N for a layer's own point
  int64_t iteration = 0;  // the counted step
  double amax = 0, scale_min = 1, scale_max = 1;
  int64_t sites = 0;  // delayed scaling: the tensors the point keeps a history for
  uint64_t values = 0, overflow = 0, underflow = 0, nonfinite = 0;
  // False for a block format (MX, BFP, NVFP4): each block has a range of its own, and a value
  // past it is not told apart from its rounding, so `overflow` is not counted (0, and JSON
  // "overflow_counted": false).
  bool overflow_counted = true;
};

struct SeedRun {
  uint64_t seed = 0;
  std::optional<int64_t> iterations;  // first evaluation at or above the target; none: never
  double best_accuracy = 0;
  bool loss_target = false;         // a validation-loss target (the language task)
  std::optional<double> best_loss;  // then: the lowest finite validation loss; none: diverged
  // (iteration, test accuracy), or validation loss with a loss target
  std::vector<std::pair<int64_t, double>> curve;
  int64_t skipped_steps = 0;  // dynamic loss scaling overflows
  double final_loss_scale = 1;
  double seconds = 0;
  std::vector<ScalingSample> scaling;  // every point that rounded, at every counted step
};

// Iterations to the target over the seeds of one emulation.
struct SeedSummary {
  int runs = 0, reached = 0;
  // Over the runs that reached the target; meaningful only when reached == runs.
  double mean = 0, stddev = 0, min = 0, max = 0, median = 0;
  std::optional<double> mlperf_mean;  // without the fastest and slowest (needs >= 3 runs)
};
SeedSummary summarize_seeds(const std::vector<SeedRun>& runs);

// Each point's samples over every run and counted step added up: counts summed, the largest amax,
// the widest range of scales, the most sites; iteration: the last. In the order points first
// appear.
std::vector<ScalingSample> summarize_scaling(const std::vector<std::vector<ScalingSample>>& runs);

struct EmulationResult {
  EmulationOptions options;
  std::string policy;
  std::vector<SeedRun> runs;
  SeedSummary summary;
};

}  // namespace emu

nlohmann::json to_json(const emu::SeedRun& r);
nlohmann::json to_json(const std::vector<emu::ScalingSample>& samples);
std::vector<emu::ScalingSample> scaling_from_json(const nlohmann::json& j);
std::vector<nlohmann::json> seeds_json(const emu::EmulationResult& r);
// The fields of `trainbench emulate --json`'s document: the options, the policy, every seed's
// run and the summary (its statistics only when every seed reached the target).
nlohmann::json emulation_fields(const emu::EmulationResult& r);

}  // namespace tb
