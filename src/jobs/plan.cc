#include "jobs/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/errors.h"
#include "cost/cost.h"
#include "jobs/cluster.h"
#include "platform/host.h"
#include "spec/printable.h"

namespace tb {

Config with_threads_resolved(Config c) {
  if (c.has("threads") && c.get_int("threads") == 0)
    c.set("threads", std::to_string(online_cpus()));
  return c;
}

SweepPlan plan_sweep(const SweepSpec& spec, const PlanRequest& r) {
  SweepPlan plan;
  std::vector<Config> configs = expand_sweep(spec, 2000000, &plan.invalid);
  if (!r.filter.empty()) {
    const Filter f = parse_filter(r.filter);
    check_filter(f, spec);
    std::vector<Config> kept;
    for (auto& c : configs)
      if (f.matches(c)) kept.push_back(c);
    // Nothing to run is a mistake in the filter, not an empty sweep to store.
    if (kept.empty() && !configs.empty())
      throw UsageError(fmt::format("--filter '{}' keeps none of the sweep's {} configs",
                                   printable(r.filter), configs.size()));
    configs.swap(kept);
  }
  if (!r.stratify.empty() && r.sample == 0)
    throw UsageError("--stratify needs --sample N (how many configs to spread)");
  if (r.lhs && r.sample == 0) throw UsageError("--lhs needs --sample N (how many configs to draw)");
  for (size_t i = 0; i < r.stratify.size(); ++i)
    if (std::find(r.stratify.begin(), r.stratify.begin() + long(i), r.stratify[i]) !=
        r.stratify.begin() + long(i))
      throw UsageError("--stratify: '" + printable(r.stratify[i]) + "' is named twice");
  // A sample as large as the grid is the grid: said, not taken silently.
  if (r.sample >= configs.size() && r.sample > 0)
    plan.notes.push_back(fmt::format("--sample {}: the sweep has {} config{}, so it runs them all",
                                     r.sample, configs.size(), configs.size() == 1 ? "" : "s"));
  if (r.sample > 0)
    configs = r.stratify.empty() ? sample_configs(configs, spec, r.sample, r.seed, r.lhs)
                                 : stratified_sample(configs, r.sample, r.seed, r.stratify);
  if (r.order == "cost")
    std::stable_sort(configs.begin(), configs.end(), [](const Config& x, const Config& y) {
      auto flops = [](const Config& c) {
        return has_cost(c.family()) ? step_cost(c).flops() : 0.0;
      };
      return flops(x) < flops(y);
    });
  if (r.shard == "auto") {
    const auto s = shard_from_launcher(&plan.shard_source);
    if (!s)
      throw UsageError(
          "--shard auto: no launcher rank in the environment (OMPI_COMM_WORLD_RANK, "
          "PMI_RANK, PMIX_RANK or SLURM_PROCID with its size)");
    if (s->second > 1) {
      plan.shard_index = s->first, plan.shard_count = s->second;
      configs = shard(configs, plan.shard_index, plan.shard_count);
    }
  } else if (!r.shard.empty()) {
    const auto [i, n] = parse_shard(r.shard);
    configs = shard(configs, i, n);
  }
  {
    // The sweep resolves threads=0 to every online core before its store lookup
    // (sweep_runner.cc), and the run stores that count: a threads=0 config and the grid's own
    // config of that count were one row, measured twice, while the sweep's counts said two. Each
    // is kept once, as written. After the shard is cut: shards cut on machines of other core
    // counts must partition the same list.
    std::vector<Config> kept;
    std::set<std::string> seen;
    for (auto& c : configs) {
      if (seen.insert(with_threads_resolved(c).str()).second)
        kept.push_back(std::move(c));
      else
        plan.same_as_all_cores.push_back(c.str());
    }
    configs.swap(kept);
  }
  plan.configs = std::move(configs);
  return plan;
}

}  // namespace tb
