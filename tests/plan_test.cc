// plan_sweep: the sweep's grid filtered, sampled, ordered and sharded as `trainbench sweep`
// runs it, the same as the primitives applied by hand.
#include "jobs/plan.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/errors.h"
#include "cost/cost.h"
#include "platform/host.h"
#include "support/config_texts.h"

namespace tb {
namespace {

using testing::config_texts;

TEST(SweepPlan, FiltersSamplesOrdersAndShardsAsThePrimitivesDo) {
  const SweepSpec spec = find_sweep("fc-cpu");
  const std::vector<Config> grid = expand_sweep(spec);
  ASSERT_GT(grid.size(), 6u);
  EXPECT_EQ(config_texts(plan_sweep(spec, {}).configs), config_texts(grid));

  PlanRequest r;
  r.filter = "nodes>=256,batch=64";
  const Filter f = parse_filter(r.filter);
  const SweepPlan filtered = plan_sweep(spec, r);
  ASSERT_FALSE(filtered.configs.empty());
  ASSERT_LT(filtered.configs.size(), grid.size());
  for (const auto& c : filtered.configs) EXPECT_TRUE(f.matches(c)) << c.str();
  r.filter = "nodes>100000";  // a valid condition no config meets: nothing to run is refused
  EXPECT_THROW(plan_sweep(spec, r), UsageError);

  r = {};
  r.sample = 5, r.seed = 3;
  EXPECT_EQ(config_texts(plan_sweep(spec, r).configs),
            config_texts(sample_configs(grid, spec, 5, 3, false)));

  r = {};
  r.order = "cost";
  const SweepPlan ordered = plan_sweep(spec, r);
  ASSERT_EQ(ordered.configs.size(), grid.size());
  for (size_t i = 1; i < ordered.configs.size(); ++i)
    EXPECT_LE(step_cost(ordered.configs[i - 1]).flops(), step_cost(ordered.configs[i]).flops());

  r = {};
  r.shard = "2/3";
  EXPECT_EQ(config_texts(plan_sweep(spec, r).configs), config_texts(shard(grid, 2, 3)));
}

TEST(SweepPlan, BadRequestsAreUsageErrors) {
  const SweepSpec spec = find_sweep("fc-cpu");
  PlanRequest r;
  r.stratify = {"nodes"};
  EXPECT_THROW(plan_sweep(spec, r), UsageError);  // --stratify without --sample
  r = {};
  r.lhs = true;
  EXPECT_THROW(plan_sweep(spec, r), UsageError);  // --lhs without --sample
  r = {};
  r.sample = 4, r.stratify = {"nodes", "nodes"};
  EXPECT_THROW(plan_sweep(spec, r), UsageError);  // an axis named twice
  r = {};
  r.filter = "no_such_axis=1";
  EXPECT_THROW(plan_sweep(spec, r), UsageError);
  r = {};
  r.shard = "4/3";
  EXPECT_THROW(plan_sweep(spec, r), UsageError);
  r = {};
  r.shard = "auto";
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                        "PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS"})
    unsetenv(v);
  EXPECT_THROW(plan_sweep(spec, r), UsageError);
}

// threads=0 runs, and is stored, as this machine's core count: beside the grid's own config of
// that count it is one config, planned once (the first, as written) and listed.
// A sample at least as large as the grid is the whole grid, with a note.
TEST(SweepPlan, ASampleAsLargeAsTheGridSaysSo) {
  const SweepSpec spec = find_sweep("fc-cpu");
  PlanRequest r;
  r.sample = 100000;
  const SweepPlan plan = plan_sweep(spec, r);
  EXPECT_EQ(plan.configs.size(), expand_sweep(spec).size());
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_NE(plan.notes[0].find("so it runs them all"), std::string::npos) << plan.notes[0];
}

TEST(SweepPlan, AllCoresAndTheirCountAreOneConfig) {
  const std::string cores = std::to_string(online_cpus());
  const SweepSpec spec =
      parse_sweep("[[grid]]\nfamily = \"fc\"\nlayers = 1\nnodes = 8\nthreads = [0, " + cores +
                      (cores == "1" ? "" : ", 1") + "]\n",
                  "t.toml");
  const SweepPlan plan = plan_sweep(spec, {});
  ASSERT_EQ(plan.configs.size(), cores == "1" ? 1u : 2u);
  EXPECT_EQ(plan.configs[0].get("threads"), "0");
  ASSERT_EQ(plan.same_as_all_cores.size(), 1u);
  EXPECT_NE(plan.same_as_all_cores[0].find("threads=" + cores), std::string::npos);
}

}  // namespace
}  // namespace tb
