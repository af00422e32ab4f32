#pragma once
// Time-to-accuracy (divide and conquer, the combination): for each stored emulation
// variant, iterations-to-accuracy from the emulation phase times the step time the
// accelerator model predicts for the emulated network at the variant's format.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/convergence_test.h"
#include "platform/description.h"
#include "record/emulation.h"

namespace tb {

// An emulation result as stored (Store::emulations()), with the store and platform it
// came from.
struct StoredEmulation {
  std::string store, platform;
  nlohmann::json variant;
  std::vector<nlohmann::json> seeds;
};
// Reads every store read-only; stores from before emulation results give none.
std::vector<StoredEmulation> load_emulations(const std::vector<std::string>& stores);

struct TtaVariant {
  std::string policy, model, format, cost_config;
  // What the target is: a test accuracy reached from below (Fashion-MNIST), or a validation
  // loss reached from above (metric "loss", the language task on `dataset`).
  std::string metric = "accuracy", dataset = "fashion-mnist";
  double target = 0;
  // "accuracy >= 0.86" or "loss <= 1.6 (gcide)"
  std::string target_text() const;
  int seeds = 0, reached = 0;
  // Over the seeds that reached the target; meaningful only when all did (otherwise the
  // variant is "not reached" and carries no number).
  double mean_iterations = 0, stddev_iterations = 0, min_iterations = 0, max_iterations = 0;
  std::optional<double> mlperf_iterations;  // without the fastest and slowest (>= 3 seeds)
  double step_s = 0;                        // simulated on the accelerator
  std::string format_note;                  // when the accelerator runs the format as another
  // The emulated compute format when --run-as gave the step another (format then names it).
  std::string emulated_format;
  // Why the accelerator cannot run the format (no peak, no runs_as): the variant then has no
  // step time and no TTA, and its status is `unsupported`.
  std::string unsupported;
  // The simulator's error on the platform, and in this variant's format (validation_phrase).
  std::string validation;
  std::optional<double> tta_s, tta_mlperf_s, tta_min_s, tta_max_s;
  // How the iterations were counted: batch, learning rate, momentum, and the evaluation's
  // interval and examples. Iterations counted otherwise are not comparable: a variant gets a
  // speedup only against a baseline of the same protocol (as of the same model and target).
  std::string protocol;
  // Why a variant with a baseline of its model and target got no speedup: its protocol differs.
  std::string no_speedup;
  std::optional<double> speedup;  // baseline's TTA / this TTA (same model, target, protocol)
  // Its 95% confidence interval (the iterations' ratio's, times the step times' ratio), and the
  // t-test against the baseline's iterations (both need >= 2 seeds that reached the target).
  std::optional<double> speedup_lo, speedup_hi;
  std::optional<IterationComparison> vs_baseline;
  std::vector<double> iterations;  // per seed that reached the target
  // What each rounding point did over the seeds (emu::summarize_scaling), where recorded.
  std::vector<emu::ScalingSample> rounding;
  bool baseline = false;
  const StoredEmulation* source = nullptr;
  bool all_reached() const { return seeds > 0 && reached == seeds; }
};

struct TtaResult {
  std::string platform;
  // The simulator's error on this platform against published throughputs, or "not
  // validated" (analysis/published.h): every speedup rests on it.
  std::string validation;
  std::vector<TtaVariant> variants;
};

// `baseline`: the 1-based number of the variant to compare against, or its policy text;
// empty: per model, target and protocol, the first variant with every point off, no unit and
// no loss scaling (fp32). `run_as`: items `VARIANT=FORMAT`, VARIANT a variant's number or policy
// text (as `baseline`; policies may hold '=' themselves, so the split is the one whose left
// side names a variant), FORMAT the format its step is simulated in instead of its emulated
// compute format: how the accelerator would train it (an fp32 baseline as amp-bf16, an
// e4m3@current variant as amp-fp8@current on a GPU); a policy text names every variant with
// it. Throws UsageError for a baseline or run_as item that matches no variant, a variant named
// twice, a run_as FORMAT the accelerator cannot run, or an emulation whose network the cost
// model does not know.
TtaResult time_to_accuracy(const std::vector<StoredEmulation>& emulations,
                           const PlatformDescription& accelerator, const std::string& baseline = "",
                           const std::vector<std::string>& run_as = {});

nlohmann::json to_json(const TtaResult& r);
std::string format_tta(const TtaResult& r);

}  // namespace tb
