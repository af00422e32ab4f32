#include "jobs/sweep_runner.h"

#include <fmt/format.h>

#include <chrono>

#include "jobs/child.h"
#include "jobs/job_spec.h"
#include "jobs/plan.h"
#include "jobs/repeat.h"
#include "platform/host.h"
#include "record/context.h"
#include "record/json.h"
#include "record/repetitions.h"
#include "runner/characterize.h"
#include "runner/runner.h"
#include "runner/threads.h"

namespace tb {

nlohmann::json platform_identity() { return host_fingerprint(); }

nlohmann::json stack_identity() {
  const Context c = current_context();
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : c.runtime_env) env[k] = v;
  return {{"trainbench_version", c.trainbench_version},
          {"git_revision", c.git_revision},
          {"libtorch", c.libtorch_version},
          {"blas", c.blas.label() + " " + c.blas.version},
          {"compiler", c.compiler},
          {"onednn", c.onednn},
          {"runtime_env", env}};
}

int64_t host_platform_id(Store& store) {
  std::string why;
  const auto described = load_cached_platform(platform_cache_path(), host_fingerprint(), &why);
  return store.platform_id(platform_identity(),
                           described ? described->name : "host-" + host_info().hostname,
                           described ? to_json(*described) : nlohmann::json());
}

SweepSummary run_sweep(const std::vector<Config>& configs, Store& store, const SweepOptions& o,
                       const std::function<void(const SweepEvent&)>& on_event) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  SweepSummary sum;
  // Every config under every stack, the stacks of one config back to back: on a shared
  // machine, what is compared is then measured close together in time.
  std::vector<StackSpec> stacks = o.stacks.empty() ? std::vector<StackSpec>{StackSpec{}} : o.stacks;
  std::vector<std::pair<const Config*, size_t>> items;
  for (const auto& c : configs)
    for (size_t k = 0; k < stacks.size(); ++k) items.push_back({&c, k});
  sum.total = items.size();

  const int64_t platform = host_platform_id(store);
  std::vector<int64_t> stack_ids;
  for (const auto& st : stacks) {
    nlohmann::json identity = stack_identity();
    if (!st.is_default()) identity["requested"] = st.str();
    stack_ids.push_back(store.stack_id(identity));
  }
  const int64_t memory_limit =
      o.memory_limit > 0 ? o.memory_limit : int64_t(0.9 * double(available_memory_bytes()));
  const double timeout = o.timeout_s > 0 ? o.timeout_s : 3 * o.budget_s + 60;

  const int reps = std::max(1, o.repetitions);
  sum.total = items.size() * size_t(reps);
  sum.repetitions = reps;
  bool stopped = false;
  // Threads are resolved before the identity check, so a config re-run on the same machine
  // matches the row its first run left.
  const auto resolved = [&](size_t i) { return with_threads_resolved(*items[i].first); };
  for (int round = 0; round < reps && !stopped; ++round) {
    for (size_t i = 0; i < items.size(); ++i) {
      const int64_t stack = stack_ids[items[i].second];
      const StackSpec& stack_spec = stacks[items[i].second];
      if (o.stop && o.stop->load()) {
        sum.interrupted = stopped = true;
        break;
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (o.sweep_budget_s > 0 && elapsed >= o.sweep_budget_s) {
        sum.out_of_budget = stopped = true;
        break;
      }
      const Config c = resolved(i);
      const std::string text = c.str();
      SweepEvent ev{size_t(round) * items.size() + i,
                    sum.total,
                    round + 1,
                    reps,
                    stack_spec.is_default() ? text : text + " " + stack_spec.str(),
                    "",
                    "",
                    0};
      RunOptions ro;
      ro.memory_limit = double(memory_limit);
      // --rerun and --retry-failed start a config afresh in the first round only; later
      // rounds add to what that round stored.
      const bool fresh_start = round == 0 && o.rerun;
      nlohmann::json previous =
          fresh_start ? nlohmann::json() : store.run_result(text, platform, stack);
      const std::string recorded =
          previous.is_null() ? "" : previous.value("status", std::string("crashed"));
      // A config counts as done unless it failed for reasons that may not recur (with
      // --retry-failed) or was predicted not to fit and now would.
      const bool retry =
          round == 0 && ((o.retry_failed &&
                          (recorded == "crashed" || recorded == "oom" || recorded == "timeout")) ||
                         (recorded == "oom-predicted" && !refuse_before_running(c, ro)));
      if (retry) previous = nullptr;
      // Round k runs the configs that rest on k processes or fewer.
      const bool enough =
          !previous.is_null() && (recorded != "ok" || repetition_count(previous) > round);
      if (enough) {
        ++sum.skipped;
        ev.outcome = "skipped";
        ev.detail = round == 0 || recorded == "ok" ? "already in the store"
                                                   : "not ok in an earlier repetition";
        on_event(ev);
        continue;
      }
      if (previous.is_null()) {
        if (auto refused = refuse_before_running(c, ro)) {
          store.add_run(to_json(*refused, false), platform, stack, o.sweep_name,
                        fresh_start || retry);
          ++sum.predicted_oom;
          ev.outcome = to_string(refused->status);
          ev.detail = refused->error;
          on_event(ev);
          continue;
        }
      }
      ev.outcome = "running";
      on_event(ev);
      ChildOptions co{o.binary, timeout, memory_limit, o.stop};
      JobSpec job;
      job.config = c;
      job.stack = stack_spec;
      job.timing.budget_s = o.budget_s;
      job.timing.target_rel_ci = o.target_ci;
      const ChildOutcome r = run_child(job.args(), co);
      if (r.interrupted) {
        sum.interrupted = stopped = true;
        break;
      }
      if (r.harness_error) {  // not the config's fault: stop rather than record it as failed
        sum.harness_error = "could not run " + text + ": " + r.error;
        stopped = true;
        break;
      }
      const nlohmann::json result = result_of(r, c);
      const nlohmann::json combined = add_repetition(previous, result);
      store.add_run(combined, platform, stack, o.sweep_name,
                    !previous.is_null() || fresh_start || retry);
      ++sum.ran;
      ev.wall_s = r.wall_s;
      ev.outcome = result.value("status", std::string("crashed"));
      if (ev.outcome == "ok") {
        ++sum.ok;
        ev.detail =
            fmt::format("{:.1f} examples/s", number_or(result["metrics"], "examples_per_s", 0.0));
        if (combined.value("unstable", false) && round + 1 == reps) {
          ++sum.unstable;
          ev.detail += fmt::format(
              "; UNSTABLE: processes' means differ {:.2f}x",
              number_or(combined["repetitions"]["between_processes"], "max_over_min", 0.0));
        }
        if (o.profile && stack_spec.is_default() && previous.is_null()) {
          // A profile that fails costs the config nothing: its run is already recorded.
          JobSpec profile;
          profile.kind = JobSpec::Kind::kProfile;
          profile.config = c;
          profile.profile_steps = o.profile_steps;
          const ChildOutcome p = run_child(profile.args(), co);
          if (p.status == Status::kOk && p.result.contains("profile")) {
            store.add_profile(p.result["profile"], platform, stack);
            ++sum.profiled;
          } else if (!p.interrupted) {
            ev.detail += "; profile failed: " +
                         (p.error.empty() ? p.result.value("error", std::string()) : p.error);
          }
        }
      } else {
        ++sum.failed;
        ev.detail = result.value("error", std::string());
      }
      on_event(ev);
    }
  }
  sum.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (reps > 1) {
    // Every config as the store holds it now, runs of earlier invocations included.
    std::vector<nlohmann::json> stored;
    for (size_t i = 0; i < items.size(); ++i)
      stored.push_back(store.run_result(resolved(i).str(), platform, stack_ids[items[i].second]));
    sum.drift = round_drift(stored, reps);
  }
  return sum;
}

}  // namespace tb
