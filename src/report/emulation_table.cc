#include "report/emulation_table.h"

#include <fmt/format.h>

#include <cmath>

#include "analysis/rounding_table.h"

namespace tb {

std::string format_emulation(const emu::EmulationResult& r) {
  const emu::SeedSummary& s = r.summary;
  const bool by_loss = r.options.target_loss > 0;
  const double target = by_loss ? r.options.target_loss : r.options.target;
  std::string out =
      by_loss ? fmt::format(
                    "model {} on {}, batch {}, lr {}, target validation loss {} nats/byte (first "
                    "evaluation at or below it; {} held-out windows every {} iterations), budget "
                    "{} iterations\n{}\n",
                    r.options.model, r.options.dataset, r.options.batch, r.options.lr, target,
                    r.options.eval_examples, r.options.eval_every, r.options.max_iters, r.policy)
              : fmt::format(
                    "model {}, batch {}, lr {}, target test accuracy {} (first evaluation at or "
                    "above it; {} test images every {} iterations), budget {} iterations\n{}\n",
                    r.options.model, r.options.batch, r.options.lr, target, r.options.eval_examples,
                    r.options.eval_every, r.options.max_iters, r.policy);
  out += fmt::format("{:>6}  {:>20}  {:>13}  {:>8}  {:>9}\n", "seed", "iterations-to-target",
                     by_loss ? "best loss" : "best accuracy", "skipped", "time (s)");
  for (const auto& run : r.runs)
    out += fmt::format("{:>6}  {:>20}  {:>13.4f}  {:>8}  {:>9.1f}\n", run.seed,
                       run.iterations ? std::to_string(*run.iterations) : "not reached",
                       by_loss ? run.best_loss.value_or(NAN) : run.best_accuracy, run.skipped_steps,
                       run.seconds);
  std::vector<std::vector<emu::ScalingSample>> samples;
  for (const auto& run : r.runs) samples.push_back(run.scaling);
  if (const auto points = emu::summarize_scaling(samples); !points.empty())
    out += "what rounding did, over all runs and counted steps (values after scaling):\n" +
           format_rounding(points);
  if (s.reached < s.runs)
    return out + fmt::format(
                     "{} of {} runs did not reach {} within {} iterations: no mean is "
                     "reported\n",
                     s.runs - s.reached, s.runs, target, r.options.max_iters);
  out += fmt::format("iterations to {}: mean {:.1f}, sd {:.1f}, min {}, median {}, max {}", target,
                     s.mean, s.stddev, s.min, s.median, s.max);
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
