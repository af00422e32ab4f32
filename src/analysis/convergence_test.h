#pragma once
// Whether a variant's iterations-to-target exceed a reference's: a one-sided t-test over seeds,
// as MLPerf Training's reference-convergence-point (RCP) check compares a submission with its
// reference runs, in the other direction (MLPerf asks whether a submission converges too
// fast; low precision asks whether it converges slower). The speedup a format buys rests on
// this, so it comes with its confidence interval and with the number of seeds that would
// resolve a 10% difference.
#include <optional>
#include <vector>

namespace tb {

struct IterationComparison {
  // reference mean / variant mean: the speedup from iterations alone (< 1: more iterations),
  // with its 95% confidence interval (delta method on the log of the ratio, Welch's degrees
  // of freedom).
  double ratio = 1, ratio_lo = 1, ratio_hi = 1;
  // Welch's one-sided t-test of "the variant needs more iterations than the reference": the
  // statistic, its degrees of freedom and p-value. p < 0.05: it does, at MLPerf's 5% level.
  double t = 0, dof = 0, p_more = 0.5;
  // Seeds per variant (the same for both) a one-sided t-test at 5% needs to tell a 10%
  // difference in mean iterations with 80% power, at these runs' coefficient of variation.
  int seeds_for_10pct = 0;
};

// Iterations of the runs that reached the target, per seed. None below 2 runs on either side
// (no variance); runs with no spread at all give a zero-width interval.
std::optional<IterationComparison> compare_iterations(const std::vector<double>& variant,
                                                      const std::vector<double>& reference);

}  // namespace tb
