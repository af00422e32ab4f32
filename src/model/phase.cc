#include "model/phase.h"

#include <string>

namespace tb {
namespace {
std::atomic<int> g_phase{0};
std::array<std::atomic<int64_t>, kPhaseCount> g_phase_ns{};
}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
    default:
      return "other";
  }
}

Phase current_phase() { return Phase(g_phase.load(std::memory_order_relaxed)); }

std::array<double, kPhaseCount> phase_seconds() {
  std::array<double, kPhaseCount> s{};
  for (int i = 0; i < kPhaseCount; ++i)
    s[size_t(i)] = 1e-9 * double(g_phase_ns[size_t(i)].load(std::memory_order_relaxed));
  return s;
}

PhaseScope::PhaseScope(Phase p)
    : phase_(p),
      previous_(Phase(g_phase.exchange(int(p), std::memory_order_relaxed))),
      start_(p != Phase::kOther && previous_ == Phase::kOther
                 ? std::chrono::steady_clock::now()
                 : std::chrono::steady_clock::time_point{}),
      scope_(at::RecordScope::USER_SCOPE) {
  if (scope_.isActive()) {
    switch (p) {
      case Phase::kForward:
        scope_.before("tb::forward");
        break;
      case Phase::kBackward:
        scope_.before("tb::backward");
        break;
      case Phase::kOptimizer:
        scope_.before("tb::optimizer");
        break;
      default:
        scope_.before("tb::other");
    }
  }
}

PartScope::PartScope(const char* part) : scope_(at::RecordScope::USER_SCOPE) {
  if (scope_.isActive()) scope_.before(std::string(kPartScopePrefix) + part);
}

FrozenWeightsScope::FrozenWeightsScope(const std::vector<at::Tensor>& parameters)
    : scope_(at::RecordScope::USER_SCOPE) {
  if (scope_.isActive()) {
    inputs_.assign(parameters.begin(), parameters.end());
    scope_.before("tb::frozen", &inputs_);
  }
}

// The profiler scope ends after this body, when scope_ is destroyed.
PhaseScope::~PhaseScope() {
  if (start_ != std::chrono::steady_clock::time_point{})
    g_phase_ns[size_t(phase_)].fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - start_)
                                             .count(),
                                         std::memory_order_relaxed);
  g_phase.store(int(previous_), std::memory_order_relaxed);
}

}  // namespace tb
