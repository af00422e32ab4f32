#include "runner/profile.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "base/errors.h"
#include "cost/cost.h"
#include "cost/layers.h"
#include "cost/op_cost.h"
#include "model/phase.h"
#include "model/workload.h"
#include "runner/block_cache.h"
#include "runner/cpu_usage.h"
#include "runner/failure.h"
#include "runner/runner.h"
#include "runner/threads.h"
#include "runner/utilization.h"

namespace tb {
namespace {

std::string shape_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string out;
  for (const auto& s : shapes) {
    if (!out.empty()) out += ", ";
    if (s.empty()) {
      out += "-";
      continue;
    }
    for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  }
  return out;
}

struct Span {
  double start, end;
};

// Total length of the union of intervals.
double union_length(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  double total = 0, cur_s = 0, cur_e = -1;
  for (const auto& i : v) {
    if (i.start > cur_e) {
      if (cur_e > cur_s) total += cur_e - cur_s;
      cur_s = i.start, cur_e = i.end;
    } else {
      cur_e = std::max(cur_e, i.end);
    }
  }
  if (cur_e > cur_s) total += cur_e - cur_s;
  return total;
}

// What aggregation decides about each event; also what the trace shows.
struct Annotated {
  int parent = -1;
  std::string phase = "other";
  double self_us = 0, flops = 0, bytes = 0;
  std::string flops_source;
  std::string part;
  bool owner = false;  // its FLOPs and bytes count (no ancestor's do)
};

bool is_backward_node(const OpEvent& e) {
  return e.sequence_nr >= 0 && (e.name.find("Backward") != std::string::npos ||
                                e.name.rfind("autograd::engine::evaluate_function", 0) == 0);
}

// Model parts (model/phase.h's PartScope): an operator inside a tb::part::<name> range on its
// thread is in that part; a backward node is in the part of the forward operator that made
// it (autograd's sequence number on the forward thread); anything else in its parent's.
// Recomputed forwards run inside the backward phase, within their own part ranges.
void assign_parts(const std::vector<OpEvent>& events, const std::vector<size_t>& order,
                  std::vector<Annotated>& ann) {
  struct PartRange {
    Span r;
    uint64_t tid;
    std::string part;
  };
  std::vector<PartRange> ranges;
  const std::string prefix = kPartScopePrefix;
  for (const auto& e : events)
    if (e.user_scope && e.name.rfind(prefix, 0) == 0)
      ranges.push_back({{e.start_us, e.start_us + e.dur_us}, e.tid, e.name.substr(prefix.size())});
  if (ranges.empty()) return;
  // The innermost range containing the event's start: the latest-starting one.
  auto contained = [&](const OpEvent& e) -> const std::string* {
    const PartRange* best = nullptr;
    for (const auto& pr : ranges)
      if (pr.tid == e.tid && e.start_us >= pr.r.start && e.start_us <= pr.r.end &&
          (!best || pr.r.start >= best->r.start))
        best = &pr;
    return best ? &best->part : nullptr;
  };
  // Forward operators by (thread, sequence number): the latest one to take a number is the
  // one whose autograd node has it.
  std::map<std::pair<uint64_t, int64_t>, std::pair<double, std::string>> forward;
  for (size_t i : order) {
    const auto& e = events[i];
    if (e.sequence_nr < 0 || is_backward_node(e)) continue;
    if (const std::string* part = contained(e)) {
      auto& slot = forward[{e.tid, e.sequence_nr}];
      if (slot.second.empty() || e.start_us >= slot.first) slot = {e.start_us, *part};
    }
  }
  for (size_t i : order) {  // parents first
    const auto& e = events[i];
    auto& a = ann[i];
    if (const std::string* part = contained(e)) {
      a.part = *part;
    } else if (is_backward_node(e)) {
      const auto it = forward.find({e.fwd_tid ? e.fwd_tid : e.tid, e.sequence_nr});
      if (it != forward.end()) a.part = it->second.second;
    }
    if (a.part.empty() && a.parent >= 0) a.part = ann[a.parent].part;
  }
}

// convolution_backward's output_mask, call by call, while a profile records: the profiler
// keeps the shapes of an operator's tensor arguments but not the values of its others.
std::mutex conv_masks_mu;
std::vector<std::vector<bool>> conv_masks;
constexpr const char* kConvBackward = "aten::convolution_backward";

std::unique_ptr<at::ObserverContext> record_conv_mask(const at::RecordFunction& fn) {
  if (std::strcmp(fn.name(), kConvBackward) != 0) return nullptr;
  const auto in = fn.inputs();
  std::vector<bool> mask;
  if (!in.empty() && in.back().isBoolList())
    for (bool b : in.back().toBoolList()) mask.push_back(b);
  std::lock_guard<std::mutex> lock(conv_masks_mu);
  conv_masks.push_back(std::move(mask));
  return nullptr;
}

// Records the masks from construction to destruction (the profiled steps).
struct ConvMaskRecorder {
  at::CallbackHandle handle;
  ConvMaskRecorder() {
    std::lock_guard<std::mutex> lock(conv_masks_mu);
    conv_masks.clear();
    handle = at::addGlobalCallback(at::RecordFunctionCallback(record_conv_mask)
                                       .needsInputs(true)
                                       .scopes({at::RecordScope::FUNCTION}));
  }
  ~ConvMaskRecorder() { at::removeCallback(handle); }
  // Gives each convolution_backward event its call's mask, in start order; none where the
  // counts differ (a call the profiler did not keep, or one outside the window).
  void attach(std::vector<OpEvent>& events) const {
    std::vector<size_t> idx;
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].name == kConvBackward) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return events[a].start_us < events[b].start_us; });
    std::lock_guard<std::mutex> lock(conv_masks_mu);
    if (idx.size() != conv_masks.size()) return;
    for (size_t k = 0; k < idx.size(); ++k)
      if (conv_masks[k].size() == 3) events[idx[k]].output_mask = conv_masks[k];
  }
};

Profile aggregate(const std::vector<OpEvent>& events, int steps, std::vector<TraceEvent>* trace,
                  const std::vector<std::vector<int64_t>>& no_grad_shapes = {}) {
  Profile p;
  p.steps = steps;
  std::vector<Span> step_ranges;
  std::vector<std::pair<Span, std::string>> phase_ranges;
  std::map<std::string, double> phase_total;
  // Stretches in which some weights were frozen, with those weights' shapes.
  std::vector<std::pair<Span, std::vector<std::vector<int64_t>>>> frozen;
  for (const auto& e : events) {
    if (!e.user_scope) continue;
    const Span r{e.start_us, e.start_us + e.dur_us};
    if (e.name == "tb::step") step_ranges.push_back(r);
    if (e.name == "tb::frozen") frozen.push_back({r, e.shapes});
    for (const char* ph : {"forward", "backward", "optimizer"})
      if (e.name == std::string("tb::") + ph) {
        phase_ranges.push_back({r, ph});
        phase_total[ph] += e.dur_us;
      }
  }

  // Operators nest per thread: sort by start (longest first on ties, which puts a parent
  // before a child that starts in the same microsecond), then walk with a stack.
  std::vector<size_t> order;
  for (size_t i = 0; i < events.size(); ++i)
    if (!events[i].user_scope) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = events[a];
    const auto& y = events[b];
    return std::make_tuple(x.tid, x.start_us, -x.dur_us) <
           std::make_tuple(y.tid, y.start_us, -y.dur_us);
  });
  std::vector<Annotated> ann(events.size());
  std::vector<size_t> stack;
  uint64_t tid = ~0ull;
  for (size_t i : order) {
    const auto& e = events[i];
    if (e.tid != tid) stack.clear(), tid = e.tid;
    // The profiler's microsecond timestamps are truncated: a child may seem to end up
    // to 1 us after its parent.
    while (!stack.empty()) {
      const auto& top = events[stack.back()];
      const double top_end = top.start_us + top.dur_us;
      if (e.start_us < top_end || (e.start_us == top_end && e.dur_us == 0)) break;
      stack.pop_back();
    }
    if (!stack.empty()) ann[i].parent = int(stack.back());
    stack.push_back(i);
  }

  // Phase of a root: the phase range containing its start; children inherit it.
  std::vector<Span> roots;
  for (size_t i : order) {  // parents come before their children in `order`
    auto& a = ann[i];
    const auto& e = events[i];
    if (a.parent >= 0) {
      a.phase = ann[a.parent].phase;
    } else {
      roots.push_back({e.start_us, e.start_us + e.dur_us});
      for (const auto& [r, ph] : phase_ranges)
        if (e.start_us >= r.start && e.start_us <= r.end) a.phase = ph;
    }
    a.self_us = e.dur_us;
  }
  assign_parts(events, order, ann);
  std::vector<bool> has_children(events.size(), false);
  for (size_t i : order)
    if (ann[i].parent >= 0) {
      ann[ann[i].parent].self_us -= events[i].dur_us;
      has_children[ann[i].parent] = true;
    }

  // FLOPs and bytes: counted at the outermost operator that the cost table knows, that the
  // profiler counts, or that calls nothing; never again below it.
  std::vector<bool> covered(events.size(), false);  // an ancestor owns the cost
  for (size_t i : order) {
    auto& a = ann[i];
    const auto& e = events[i];
    a.self_us = std::max(0.0, a.self_us);
    if (a.parent >= 0) covered[i] = covered[a.parent] || ann[a.parent].owner;
    if (covered[i]) continue;
    // No weight gradient: for a backward operator inside the forward phase (a gradient with
    // respect to the inputs, as a gradient penalty takes it), or on a frozen weight.
    bool weight_gradients = a.phase != "forward";
    if (weight_gradients && e.shapes.size() > 2)
      for (const auto& [r, shapes] : frozen)
        if (e.start_us >= r.start && e.start_us <= r.end &&
            std::find(shapes.begin(), shapes.end(), e.shapes[2]) != shapes.end())
          weight_gradients = false;
    // A convolution whose input needs no gradient (fed by a frozen stage, not only by the
    // batch) or whose weight is frozen computes only the other one: the call says which.
    std::vector<std::vector<int64_t>> no_grad = no_grad_shapes;
    if (e.output_mask.size() == 3 && e.shapes.size() > 2) {
      weight_gradients = weight_gradients && e.output_mask[1];
      if (!e.output_mask[0]) no_grad.push_back(e.shapes[1]);
    }
    const cost::OpCost c = cost::op_cost(e.name, e.shapes, e.dtypes, no_grad, weight_gradients);
    if (c.known || e.profiler_flops > 0 || !has_children[i]) {
      a.owner = true;
      a.bytes = c.bytes;
      if (c.known && c.flops > 0) {
        a.flops = c.flops;
        a.flops_source = "model";
      } else if (e.profiler_flops > 0) {
        a.flops = e.profiler_flops;
        a.flops_source = "profiler";
      }
    }
  }

  std::map<std::tuple<std::string, std::string, std::string, std::string>, OpStats> rows;
  double window_start = 1e300, window_end = -1e300;
  for (size_t i : order) {
    const auto& e = events[i];
    const auto& a = ann[i];
    const std::string shapes = shape_text(e.shapes);
    OpStats& s = rows[{e.name, shapes, a.phase, a.part}];
    if (s.calls == 0) {
      s.name = e.name, s.shapes = shapes, s.phase = a.phase, s.op_class = cost::op_class(e.name);
      s.part = a.part;
      if (a.phase == "optimizer" && s.op_class != "memory" && s.op_class != "quantize")
        s.op_class = "optimizer";
    }
    s.calls += 1;
    s.total_us += e.dur_us;
    s.self_us += a.self_us;
    s.flops += a.flops;
    s.bytes += a.bytes;
    s.profiler_flops += e.profiler_flops;
    if (!a.flops_source.empty()) s.flops_source = a.flops_source;
    window_start = std::min(window_start, e.start_us);
    window_end = std::max(window_end, e.start_us + e.dur_us);
  }
  const double n = std::max(1, steps);
  for (auto& [k, s] : rows) {
    s.calls /= n, s.total_us /= n, s.self_us /= n, s.flops /= n, s.bytes /= n;
    s.profiler_flops /= n;
    p.flops += s.flops;
    p.bytes += s.bytes;
    p.ops.push_back(s);
  }
  std::stable_sort(p.ops.begin(), p.ops.end(),
                   [](const OpStats& a, const OpStats& b) { return a.self_us > b.self_us; });

  double steps_us = 0;
  for (const auto& r : step_ranges) steps_us += r.end - r.start;
  if (step_ranges.empty() && window_end > window_start) steps_us = window_end - window_start;
  p.step_us = steps_us / n;
  double phased = 0;
  for (const auto& [ph, us] : phase_total) {
    p.phase_us[ph] = us / n;
    phased += us / n;
  }
  p.phase_us["other"] = std::max(0.0, p.step_us - phased);
  p.utilization.elapsed_s = steps_us * 1e-6;
  p.utilization.active_s = union_length(roots) * 1e-6;
  p.utilization.compute = compute_utilization(p.utilization.active_s, p.utilization.elapsed_s);

  if (trace) {
    double t0 = 1e300;
    for (const auto& e : events) t0 = std::min(t0, e.start_us);
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      TraceEvent t{e.name, e.user_scope ? "tb" : cost::op_class(e.name), e.start_us - t0, e.dur_us,
                   e.tid};
      if (!e.user_scope) {
        t.args = {
            {"shapes", shape_text(e.shapes)}, {"phase", ann[i].phase}, {"self_us", ann[i].self_us}};
        if (!ann[i].part.empty()) t.args["part"] = ann[i].part;
        if (ann[i].flops > 0) t.args["flops"] = ann[i].flops;
      }
      trace->push_back(std::move(t));
    }
  }
  return p;
}

std::vector<OpEvent> op_events(torch::autograd::profiler::ProfilerResult& result) {
  std::vector<OpEvent> events;
  for (const auto& e : result.events()) {
    if (e.deviceType() != c10::DeviceType::CPU) continue;
    OpEvent x;
    x.name = e.name();
    x.start_us = double(e.startUs());
    x.dur_us = double(e.durationUs());
    x.tid = e.startThreadId();
    x.user_scope = e.scope() == uint8_t(at::RecordScope::USER_SCOPE);
    if (e.hasShapes())
      for (const auto& s : e.shapes()) x.shapes.push_back(s);
    if (e.hasTypes())
      for (const auto& d : e.dtypes()) x.dtypes.push_back(d);
    x.profiler_flops = double(e.flops());
    x.sequence_nr = e.sequenceNr();
    x.fwd_tid = e.fwdThreadId();
    events.push_back(std::move(x));
  }
  return events;
}

torch::autograd::profiler::ProfilerConfig profiler_config() {
  using namespace torch::autograd::profiler;
  return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true,
                        /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/true,
                        /*with_modules=*/false);
}

}  // namespace

// The shapes of the batch's inputs: tensors that never require a gradient.
std::vector<std::vector<int64_t>> input_shapes(const Batch& b) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& t : b.inputs)
    if (t.defined() && !t.requires_grad()) out.push_back(t.sizes().vec());
  return out;
}

Profile aggregate_profile(const std::vector<OpEvent>& events, int steps) {
  return aggregate(events, steps, nullptr);
}

namespace {
// A per-step profile as a StepCost (source "profiler"): FLOPs by phase and bytes.
StepCost cost_from_profile(const Profile& p, const Config& config, Workload& w,
                           const Batch& batch) {
  StepCost c;
  c.source = "profiler";
  for (const auto& op : p.ops) {
    if (op.phase == "forward") {
      c.fwd_flops += op.flops;
      if (op.op_class == "matmul" || op.op_class == "conv") c.fwd_matmul_flops += op.flops;
    } else if (op.phase == "backward") {
      c.bwd_flops += op.flops;
    } else {
      c.opt_flops += op.flops;  // the optimizer and anything outside the three phases
    }
  }
  c.bytes = p.bytes;
  for (const auto& t : w.module().parameters())
    if (t.requires_grad()) c.params += t.numel();
  c.memory = workload_memory_estimate(config, w, batch);
  return c;
}

// The operators `run` dispatches, as the CPU profiler records them, with each
// convolution_backward's output_mask. The caller has prepared the profiler.
template <typename Run>
std::vector<OpEvent> profiled_events(const torch::autograd::profiler::ProfilerConfig& pc,
                                     const std::set<torch::profiler::impl::ActivityType>& act,
                                     Run run) {
  std::optional<ConvMaskRecorder> masks(std::in_place);
  torch::autograd::profiler::enableProfiler(pc, act);
  run();
  auto result = torch::autograd::profiler::disableProfiler();
  std::vector<OpEvent> events = op_events(*result);
  masks->attach(events);
  return events;
}

}  // namespace

StepCost measured_step_cost(const Config& config, Workload& w, torch::optim::Optimizer& opt,
                            const Batch& batch, torch::Device device) {
  using namespace torch::autograd::profiler;
  train_step(w, opt, batch, device);
  const ProfilerConfig pc = profiler_config();
  const std::set<torch::profiler::impl::ActivityType> activities = {
      torch::profiler::impl::ActivityType::CPU};
  prepareProfiler(pc, activities);
  const std::vector<OpEvent> events = profiled_events(pc, activities, [&] {
    RECORD_USER_SCOPE("tb::step");
    train_step(w, opt, batch, device);
  });
  return cost_from_profile(aggregate(events, 1, nullptr, input_shapes(batch)), config, w, batch);
}

MemoryEstimate workload_memory_estimate(const Config& config, Workload& w, const Batch& batch) {
  double params = 0;
  for (const auto& t : w.module().parameters())
    if (t.requires_grad()) params += double(t.numel());
  const int64_t eb = dtype_bytes(config.get("dtype"));
  MemoryEstimate m;
  m.weights = eb * params;
  m.gradients = eb * params;
  m.optimizer_state = eb * cost::optimizer(config.get("optimizer")).state_per_param * params;
  for (const auto& t : batch.inputs) m.inputs += double(t.nbytes());
  if (batch.target.defined()) m.inputs += double(batch.target.nbytes());
  return m;
}

ProfileRun profile_config(const Config& input, const ProfileOptions& o) {
  using namespace torch::autograd::profiler;
  using Clock = std::chrono::steady_clock;
  ProfileRun run;
  Config config = input;
  run.threads = apply_threads(int(config.get_int("threads")));
  config.set("threads", std::to_string(run.threads));
  StepCost cost;
  if (has_cost(config.family())) cost = step_cost(config);
  try {
    const torch::Device device(config.get("device"));
    if (!device.is_cpu()) {
      run.status = Status::kUnsupported;
      run.error = "profile: only the CPU is profiled so far (device " + config.get("device") + ")";
      return run;
    }
    auto [workload, batch, opt] = prepare_training(config, device, o.seed);

    for (int i = 0; i < o.warmup_steps; ++i) train_step(*workload, *opt, batch, device);
    // The step time without the profiler: as many steps as are profiled, after the warm-up.
    // Timing the warm-up's later half instead caught the allocator and the optimizer's state
    // still settling: an rnn config read 6.09 ms there, 3.42 ms profiled, 1.93 ms in `run`.
    double unprofiled = 0;
    int timed = 0;
    for (; timed < std::max(o.steps, 1); ++timed) {
      const auto t0 = Clock::now();
      train_step(*workload, *opt, batch, device);
      unprofiled += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }

    const ProfilerConfig pc = profiler_config();
    const std::set<torch::profiler::impl::ActivityType> activities = {
        torch::profiler::impl::ActivityType::CPU};
    prepareProfiler(pc, activities);
    CpuSnapshot cpu0 = cpu_snapshot();
    ThreadSnapshot threads0 = thread_snapshot();
    // For the profiled window, freed tensors' blocks go to the next tensor of their size
    // (block_cache.h): the profiler's records would otherwise fragment the heap, and every
    // profiled step would fault its tensors in afresh.
    std::optional<BlockCache> blocks(std::in_place);
    std::vector<OpEvent> events = profiled_events(pc, activities, [&] {
      for (int i = 0; i < o.steps; ++i) {
        RECORD_USER_SCOPE("tb::step");
        train_step(*workload, *opt, batch, device);
      }
    });
    ThreadSnapshot threads1 = thread_snapshot();
    CpuSnapshot cpu1 = cpu_snapshot();
    run.fresh_blocks = blocks->fresh();
    run.reused_blocks = blocks->reused();
    blocks.reset();
    int64_t accounted_steps = o.steps;
    if (threads1.wall_s - threads0.wall_s < kMinAccountingWindowS) {
      // Too short for the kernel's tick accounting: thread and CPU usage come from a window of
      // unprofiled steps long enough to be counted instead.
      cpu0 = cpu_snapshot();
      threads0 = thread_snapshot();
      const auto w0 = Clock::now();
      accounted_steps = 0;
      do {
        train_step(*workload, *opt, batch, device);
        ++accounted_steps;
      } while (accounted_steps < o.steps ||
               std::chrono::duration<double>(Clock::now() - w0).count() < kMinAccountingWindowS);
      threads1 = thread_snapshot();
      cpu1 = cpu_snapshot();
    }

    run.profile =
        aggregate(events, o.steps, o.keep_trace ? &run.trace : nullptr, input_shapes(batch));
    // Without a cost description the model's FLOPs are the profiled ones (docs/suite.md).
    if (!has_cost(config.family())) cost = cost_from_profile(run.profile, config, *workload, batch);
    Profile& p = run.profile;
    p.config = config.str();
    p.dtype = config.get("dtype");
    p.warmup_steps = o.warmup_steps;
    p.unprofiled_step_us = timed > 0 ? unprofiled / timed : 0;
    p.model_flops = cost.flops();
    p.model_phase_flops = {
        {"forward", cost.fwd_flops}, {"backward", cost.bwd_flops}, {"optimizer", cost.opt_flops}};
    p.model_part_flops = cost.model_flops.parts;
    Utilization& u = p.utilization;
    u.dtype = p.dtype;
    u.peak_flops = o.peak_flops;
    if (!u.peak_flops && o.platform) u.peak_flops = o.platform->peak_flops(p.dtype);
    const double window_flops = p.flops * o.steps;
    if (u.peak_flops) {
      u.fp = fp_utilization(window_flops, *u.peak_flops, u.active_s);
      u.fp_elapsed = fp_utilization(window_flops, *u.peak_flops, u.elapsed_s);
    }
    u.cpu = cpu_usage(cpu0, cpu1);
    u.threads = thread_activity(threads0, threads1);
    u.threads.steps = accounted_steps;
  } catch (...) {
    const Failure f = current_failure("during profiling");
    run.status = f.status;
    run.error = f.error;
  }
  return run;
}

}  // namespace tb
