#pragma once
#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <chrono>
#include <vector>

namespace tb {

// The parts of a training step, as the profiler and the memory tracker attribute work
// and allocations to them. kOther: outside forward, backward and optimizer (releasing
// the gradients, building the model, making the batch).
enum class Phase : int { kOther = 0, kForward, kBackward, kOptimizer };
inline constexpr int kPhaseCount = 4;
const char* phase_name(Phase p);  // "other", "forward", "backward", "optimizer"

// The phase the training loop is in. Process-wide rather than per thread: allocations
// made by intra-op worker threads belong to the phase their caller is in.
Phase current_phase();

// Wall seconds spent so far in each phase's outermost scopes (a PhaseScope opened while no
// phase is), indexed by Phase; kOther stays 0. Read before and after a step, the differences
// split the step without a profiler, whose per-operator events inflate small operators
// several times over. Two clock reads per scope. Process-wide, as current_phase(): one step is
// measured at a time; a scope another thread opens while a phase is open is not counted
// (data-parallel workers, whose runs report no phases).
std::array<double, kPhaseCount> phase_seconds();

// Marks a phase for its lifetime: sets current_phase(), adds its wall time to
// phase_seconds() when it is outermost, and opens a profiler user scope named "tb::<phase>"
// (free when no profiler or callback is listening), so a profile attributes every operator
// call by containment in time.
class PhaseScope {
 public:
  explicit PhaseScope(Phase p);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase phase_, previous_;
  std::chrono::steady_clock::time_point start_;
  at::RecordFunction scope_;
};

// Marks the operators of one part of a model for its lifetime (gpt: attention_scores,
// projections, mlp, logits): a profiler user scope "tb::part::<name>". A profile attributes to
// the part the operators the scope contains and the backward operators of those (linked by
// autograd's sequence numbers), so time can be split as a cost description splits FLOPs.
class PartScope {
 public:
  explicit PartScope(const char* part);
  PartScope(const PartScope&) = delete;
  PartScope& operator=(const PartScope&) = delete;

 private:
  at::RecordFunction scope_;
};
inline constexpr const char* kPartScopePrefix = "tb::part::";

// Marks a stretch of the step in which these parameters are frozen (requires_grad false,
// e.g. the critic while a GAN's generator updates): a profiler user scope "tb::frozen" whose
// recorded input shapes are theirs, so a profile counts no weight gradient for a convolution
// backward on one of them (LibTorch 1.13's profiler does not record which gradients a
// backward computes).
class FrozenWeightsScope {
 public:
  explicit FrozenWeightsScope(const std::vector<at::Tensor>& parameters);
  FrozenWeightsScope(const FrozenWeightsScope&) = delete;
  FrozenWeightsScope& operator=(const FrozenWeightsScope&) = delete;

 private:
  std::vector<c10::IValue> inputs_;  // the scope refers to them: they outlive it
  at::RecordFunction scope_;
};

}  // namespace tb
