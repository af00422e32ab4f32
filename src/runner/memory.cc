#include "runner/memory.h"

#include <unordered_map>

#include "base/errors.h"
#include "cost/cost.h"
#include "model/workload.h"
#include "runner/failure.h"
#include "runner/memory_tracker.h"
#include "runner/profile.h"
#include "runner/runner.h"
#include "runner/threads.h"

namespace tb {

std::vector<torch::Tensor> optimizer_state(torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (auto& [key, state] : opt.state()) {
    if (auto* r = dynamic_cast<torch::optim::RMSpropParamState*>(state.get())) {
      for (const auto& t : {r->square_avg(), r->momentum_buffer(), r->grad_avg()})
        if (t.defined()) out.push_back(t);
    } else if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(state.get())) {
      for (const auto& t : {a->exp_avg(), a->exp_avg_sq(), a->max_exp_avg_sq()})
        if (t.defined()) out.push_back(t);
    } else if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(state.get())) {
      for (const auto& t : {a->exp_avg(), a->exp_avg_sq(), a->max_exp_avg_sq()})
        if (t.defined()) out.push_back(t);
    } else if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(state.get())) {
      if (s->momentum_buffer().defined()) out.push_back(s->momentum_buffer());
    }
  }
  return out;
}

namespace {

// Who owns each live allocation now: the parameters, their gradients, the optimizer's
// state, the batch. Matched by the storage's data pointer, i.e. the allocation itself.
void claim_owners(const MemoryTracker& tracker, Workload& w, torch::optim::Optimizer& opt,
                  const Batch& batch, std::unordered_map<uint64_t, int>& owner) {
  auto claim = [&](const torch::Tensor& t, int category) {
    if (!t.defined() || !t.has_storage()) return;
    if (const uint64_t id = tracker.id_of(t.storage().data())) owner.emplace(id, category);
  };
  for (const auto& p : w.module().parameters()) {
    claim(p, kWeights);
    claim(p.grad(), kGradients);
  }
  for (const auto& t : optimizer_state(opt)) claim(t, kOptimizerState);
  for (auto* own : w.own_optimizers())
    for (const auto& t : optimizer_state(*own)) claim(t, kOptimizerState);
  for (const auto& t : batch.inputs) claim(t, kInputs);
  claim(batch.target, kInputs);
}

int classify(const AllocationRecord& r, const std::unordered_map<uint64_t, int>& owner) {
  if (auto it = owner.find(r.id); it != owner.end()) return it->second;
  if (r.alloc_seq < 0) return kOtherMemory;  // alive before the step, claimed by no owner
  // Made in forward and still alive when backward starts: kept by autograd for backward.
  if (r.phase == Phase::kForward && (!r.freed || r.free_phase != Phase::kForward))
    return kFeatureMaps;
  if (r.freed && r.op != 0 && r.free_op == r.op) return kWorkspace;
  return kTemporaries;
}

}  // namespace

MemoryRun measure_memory(const Config& input, const MemoryOptions& o) {
  MemoryRun run;
  Config config = input;
  config.set("threads", std::to_string(apply_threads(int(config.get_int("threads")))));
  MemoryBreakdown& m = run.breakdown;
  m.config = config.str();
  m.batch = config.get_int("batch");
  if (has_cost(config.family())) m.estimate = step_cost(config).memory;
  m.dtype_bytes = dtype_bytes(config.get("dtype"));
  try {
    const torch::Device device(config.get("device"));
    if (!device.is_cpu()) {
      run.status = Status::kUnsupported;
      run.error =
          "memory: only CPU allocations are tracked so far (device " + config.get("device") + ")";
      return run;
    }
    MemoryTracker tracker;
    auto [workload, batch, opt] = prepare_training(config, device, o.seed);
    if (!has_cost(config.family())) m.estimate = workload_memory_estimate(config, *workload, batch);
    for (const auto& p : workload->module().parameters()) m.params += p.numel();
    for (int i = 0; i < o.warmup_steps; ++i) train_step(*workload, *opt, batch, device);

    std::unordered_map<uint64_t, int> owner;
    tracker.start();
    claim_owners(tracker, *workload, *opt, batch, owner);  // the previous step's gradients
    train_step(*workload, *opt, batch, device);
    claim_owners(tracker, *workload, *opt, batch, owner);  // this step's
    tracker.stop();
    for (const auto& t : optimizer_state(*opt))
      m.optimizer_held_bytes += double(t.storage().nbytes());

    // Replay the step: every category's live bytes after each event.
    const auto& records = tracker.records();
    std::unordered_map<uint64_t, int> category;
    std::array<double, kMemoryCategories> live{};
    for (const auto& r : records) {
      category[r.id] = classify(r, owner);
      if (r.alloc_seq < 0)
        live[category[r.id]] += double(r.bytes);
      else
        ++m.allocations;
    }
    std::vector<MemoryPoint> points;
    points.push_back({0, "other", live});
    for (const auto& e : tracker.events()) {
      live[category[e.id]] += double(e.bytes);
      points.push_back({e.t_us, phase_name(e.phase), live});
    }
    size_t peak_at = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      for (int c = 0; c < kMemoryCategories; ++c)
        m.peak[c] = std::max(m.peak[c], points[i].bytes[c]);
      if (points[i].total() > points[peak_at].total()) peak_at = i;
    }
    m.peak_total = points[peak_at].total();
    m.at_peak = points[peak_at].bytes;
    m.peak_phase = points[peak_at].phase;
    // Thin the timeline to a plottable size, keeping the first, last and peak points.
    const size_t stride = std::max<size_t>(1, (points.size() + o.max_timeline_points - 1) /
                                                  std::max<size_t>(1, o.max_timeline_points));
    for (size_t i = 0; i < points.size(); ++i)
      if (i % stride == 0 || i == peak_at || i + 1 == points.size())
        m.timeline.push_back(points[i]);
  } catch (...) {
    const Failure f = current_failure("while measuring memory");
    run.status = f.status;
    run.error = f.error;
  }
  return run;
}

}  // namespace tb
