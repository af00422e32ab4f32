#include "runner/sweep_runner.h"

#include <fmt/format.h>

#include <chrono>

#include "platform/characterize.h"
#include "platform/host.h"
#include "record/context.h"
#include "record/json.h"
#include "runner/child.h"
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

  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t stack = stack_ids[items[i].second];
    const StackSpec& stack_spec = stacks[items[i].second];
    if (o.stop && o.stop->load()) {
      sum.interrupted = true;
      break;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (o.sweep_budget_s > 0 && elapsed >= o.sweep_budget_s) {
      sum.out_of_budget = true;
      break;
    }
    // Threads are resolved before the identity check, so a config re-run on the same
    // machine matches the row its first run left.
    Config c = *items[i].first;
    if (c.get_int("threads") == 0) c.set("threads", std::to_string(online_cpus()));
    const std::string text = c.str();
    SweepEvent ev{i,  items.size(), stack_spec.is_default() ? text : text + " " + stack_spec.str(),
                  "", "",           0};
    RunOptions ro;
    ro.memory_limit = double(memory_limit);
    const std::string recorded = o.rerun ? "" : store.run_status(text, platform, stack);
    // A config counts as done unless it failed for reasons that may not recur (with
    // --retry-failed) or was predicted not to fit and now would.
    const bool retry =
        (o.retry_failed && (recorded == "crashed" || recorded == "oom" || recorded == "timeout")) ||
        (recorded == "oom-predicted" && !refuse_before_running(c, ro));
    if (!recorded.empty() && !retry) {
      ++sum.skipped;
      ev.outcome = "skipped";
      ev.detail = "already in the store";
      on_event(ev);
      continue;
    }
    const bool replace = o.rerun || retry;
    if (auto refused = refuse_before_running(c, ro)) {
      store.add_run(to_json(*refused, false), platform, stack, o.sweep_name, replace);
      ++sum.predicted_oom;
      ev.outcome = to_string(refused->status);
      ev.detail = refused->error;
      on_event(ev);
      continue;
    }
    ev.outcome = "running";
    on_event(ev);
    ChildOptions co{o.binary, timeout, memory_limit, o.stop};
    std::vector<std::string> args = {"run",
                                     text,
                                     "--json",
                                     "--budget",
                                     fmt::format("{}", o.budget_s),
                                     "--target-ci",
                                     fmt::format("{}", o.target_ci)};
    if (!stack_spec.is_default()) args.insert(args.end(), {"--stack", stack_spec.str()});
    const ChildOutcome r = run_child(args, co);
    if (r.interrupted) {
      sum.interrupted = true;
      break;
    }
    if (r.harness_error) {  // not the config's fault: stop rather than record it as failed
      sum.harness_error = "could not run " + text + ": " + r.error;
      break;
    }
    nlohmann::json result = r.result;
    if (result.is_null()) {  // the child died before reporting: record what we know
      RunResult dead;
      dead.config = text;
      dead.family = c.family();
      dead.status = r.status;
      dead.error = r.error;
      dead.device = c.get("device");
      if (has_cost(c.family())) dead.cost = step_cost(c);
      result = to_json(dead, false);
    }
    if (!r.stderr_tail.empty() && r.status != Status::kOk) result["stderr_tail"] = r.stderr_tail;
    store.add_run(result, platform, stack, o.sweep_name, replace);
    ++sum.ran;
    ev.wall_s = r.wall_s;
    ev.outcome = result.value("status", std::string("crashed"));
    if (ev.outcome == "ok") {
      ++sum.ok;
      ev.detail = fmt::format("{:.1f} examples/s", result["metrics"].value("examples_per_s", 0.0));
      if (o.profile && stack_spec.is_default()) {
        // A profile that fails costs the config nothing: its run is already recorded.
        const ChildOutcome p =
            run_child({"profile", text, "--json", "--steps", std::to_string(o.profile_steps)}, co);
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
  sum.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace tb
