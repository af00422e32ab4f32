#include "report/emulation_table.h"

#include <fmt/format.h>

#include "analysis/rounding_table.h"

namespace tb {

std::string format_emulation(const emu::EmulationResult& r) {
  const emu::SeedSummary& s = r.summary;
  std::string out = fmt::format(
      "model {}, batch {}, lr {}, target test accuracy {} (first evaluation at or above it; "
      "{} test images every {} iterations), budget {} iterations\n{}\n",
      r.options.model, r.options.batch, r.options.lr, r.options.target, r.options.eval_examples,
      r.options.eval_every, r.options.max_iters, r.policy);
  out += fmt::format("{:>6}  {:>20}  {:>13}  {:>8}  {:>9}\n", "seed", "iterations-to-target",
                     "best accuracy", "skipped", "time (s)");
  for (const auto& run : r.runs)
    out += fmt::format("{:>6}  {:>20}  {:>13.4f}  {:>8}  {:>9.1f}\n", run.seed,
                       run.iterations ? std::to_string(*run.iterations) : "not reached",
                       run.best_accuracy, run.skipped_steps, run.seconds);
  std::vector<std::vector<emu::ScalingSample>> samples;
  for (const auto& run : r.runs) samples.push_back(run.scaling);
  if (const auto points = emu::summarize_scaling(samples); !points.empty())
    out += "what rounding did, over all runs and evaluations (values after scaling):\n" +
           format_rounding(points);
  if (s.reached < s.runs)
    return out + fmt::format(
                     "{} of {} runs did not reach {} within {} iterations: no mean is "
                     "reported\n",
                     s.runs - s.reached, s.runs, r.options.target, r.options.max_iters);
  out += fmt::format("iterations to {}: mean {:.1f}, sd {:.1f}, min {}, median {}, max {}",
                     r.options.target, s.mean, s.stddev, s.min, s.median, s.max);
  if (s.mlperf_mean)
    out += fmt::format("; without fastest and slowest (MLPerf) {:.1f}", *s.mlperf_mean);
  out += fmt::format(" ({} seeds)\n", s.runs);
  // An iteration count is known only to the evaluation interval.
  const double resolution = double(r.options.eval_every) / s.min;
  out += fmt::format("evaluation every {} iterations: {:.1f}% of the fewest iterations{}\n",
                     r.options.eval_every, 100 * resolution,
                     resolution > 0.02 ? " (coarser than 2%: lower --eval-every to resolve "
                                         "differences of a few percent)"
                                       : "");
  return out;
}

}  // namespace tb
