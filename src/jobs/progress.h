#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "jobs/sweep_runner.h"

namespace tb {

// Shows a sweep's progress: on a terminal a bar with done / failed / skipped counts,
// rate, ETA and the current config, redrawn in place; otherwise one line per config.
class ProgressPrinter {
 public:
  ProgressPrinter(FILE* out, bool terminal);
  void operator()(const SweepEvent& e);
  void finish(const SweepSummary& s);

 private:
  void draw(const SweepEvent& e);
  FILE* out_;
  bool terminal_;
  size_t done_ = 0, failed_ = 0, skipped_ = 0;
  double run_seconds_ = 0;
  size_t timed_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace tb
