#include "jobs/progress.h"

#include <fmt/format.h>

#include <algorithm>

#include "spec/printable.h"

namespace tb {
namespace {
std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.0f}h{:02.0f}m", std::floor(s / 3600), std::fmod(s / 60, 60));
}
}  // namespace

ProgressPrinter::ProgressPrinter(FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

void ProgressPrinter::operator()(const SweepEvent& e) {
  if (e.outcome == "running") {
    if (terminal_) draw(e);
    return;
  }
  if (e.outcome == "skipped")
    ++skipped_;
  else if (e.outcome == "ok")
    ++done_;
  else
    ++failed_;
  if (e.wall_s > 0) run_seconds_ += e.wall_s, ++timed_;
  if (terminal_) {
    if (e.outcome != "ok" && e.outcome != "skipped")  // failures stay on screen
      fmt::print(out_, "\r\033[K{} {}: {}\n", e.outcome, e.config, printable(e.detail));
    draw(e);
  } else {
    const std::string rep =
        e.repetitions > 1 ? fmt::format(" rep {}/{}", e.repetition, e.repetitions) : "";
    fmt::print(out_, "[{}/{}]{} {:<13} {} ({:.1f} s) {}\n", e.index + 1, e.total, rep, e.outcome,
               e.config, e.wall_s, printable(e.detail));
    std::fflush(out_);
  }
}

void ProgressPrinter::draw(const SweepEvent& e) {
  const size_t finished = done_ + failed_ + skipped_;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double per = timed_ ? run_seconds_ / timed_ : 0;
  const size_t left = e.total - finished;
  const int width = 24;
  const int filled = e.total ? int(width * finished / e.total) : width;
  std::string current = e.outcome == "running" ? e.config : "";
  if (current.size() > 60) current = current.substr(0, 57) + "...";
  fmt::print(out_,
             "\r\033[K[{}{}] {}/{} done {} failed {} skipped {} | {:.2f} cfg/min | ETA {} | {}",
             std::string(filled, '#'), std::string(width - filled, '.'), finished, e.total, done_,
             failed_, skipped_, elapsed > 0 ? 60.0 * (done_ + failed_) / elapsed : 0,
             per > 0 ? duration(per * left) : "?", current);
  std::fflush(out_);
}

void ProgressPrinter::finish(const SweepSummary& s) {
  if (terminal_) fmt::print(out_, "\r\033[K");
  fmt::print(
      out_,
      "sweep: {} runs{}: {} ran ({} ok, {} not ok), {} oom-predicted, {} already in the "
      "store, in {}{}{}\n",
      s.total,
      s.repetitions > 1
          ? fmt::format(" ({} configs x {} repetitions)", s.total / s.repetitions, s.repetitions)
          : "",
      s.ran, s.ok, s.failed, s.predicted_oom, s.skipped, duration(s.wall_s),
      s.unstable ? fmt::format("; {} UNSTABLE (processes disagree beyond their CIs)", s.unstable)
                 : "",
      s.interrupted     ? "; interrupted, unfinished configs not recorded"
      : s.out_of_budget ? "; sweep budget spent, re-run to resume"
                        : "");
  if (s.drift.rounds.size() >= 2) {
    // What the rounds shared: a slow minute of the machine moves every config of its round.
    // The line gives the figures and leaves the reading to docs/sweeps.md: a shift of 0.5%
    // is no evidence of anything.
    std::string shifts;
    double lo = s.drift.rounds.front().median, hi = lo;
    for (const auto& r : s.drift.rounds) {
      shifts += fmt::format("{}{:.3f}", shifts.empty() ? "" : ", ", r.median);
      lo = std::min(lo, r.median);
      hi = std::max(hi, r.median);
    }
    fmt::print(out_,
               "rounds ({} configs with {} processes): each process's mean over its config's "
               "median, median per round {} ({:.1f}% apart){}\n",
               s.drift.rounds.front().configs, s.drift.rounds.size(), shifts, 100 * (hi / lo - 1),
               s.drift.unstable
                   ? fmt::format("; of the {} flagged UNSTABLE in the store, {} agree within "
                                 "their CIs once each round's shift over the other configs is "
                                 "divided out",
                                 s.drift.unstable, s.drift.unstable_within_drift)
                   : "");
  }
  std::fflush(out_);
}

}  // namespace tb
