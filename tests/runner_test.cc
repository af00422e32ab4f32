#include "runner/runner.h"

#include <gtest/gtest.h>

#include "record/json.h"
#include "runner/threads.h"

namespace tb {
namespace {

RunOptions quick() {
  RunOptions o;
  o.timing.budget_s = 2;
  o.timing.target_rel_ci = 0.05;
  o.timing.min_samples = 5;
  return o;
}

TEST(Runner, TrainsEachFamilyAndReportsConsistentMetrics) {
  for (const char* text : {"fc:layers=2,nodes=32,input=64,output=10,batch=16",
                           "cnn:block=residual,blocks=1,filters=4,image=32,output=10,batch=2",
                           "rnn:cell=lstm,layers=1,embed=16,length=5,vocab=32,batch=4"}) {
    const RunResult r = run_config(parse_config(text), quick());
    ASSERT_EQ(r.status, Status::kOk) << text << ": " << r.error;
    EXPECT_GT(r.steps.samples, 0);
    EXPECT_GE(r.steps.warmup, 1);
    EXPECT_EQ(int64_t(r.step_times.size()), r.steps.steps);
    EXPECT_NEAR(r.examples_per_s, r.examples_per_step / r.steps.mean, 1e-9);
    EXPECT_NEAR(r.achieved_flops, r.cost.flops() / r.steps.mean, 1e-3);
    EXPECT_GT(r.cpu.process, 0);
    // The phases' clocks lie inside the step's, over the same steps: forward, backward and
    // the optimizer each took time, together no more than the step, and "other" is the rest.
    ASSERT_EQ(r.phase_s.size(), 4u) << text;
    const double marked =
        r.phase_s.at("forward") + r.phase_s.at("backward") + r.phase_s.at("optimizer");
    for (const char* p : {"forward", "backward", "optimizer"}) EXPECT_GT(r.phase_s.at(p), 0) << p;
    EXPECT_LE(marked, r.steps.mean * (1 + 1e-9)) << text;
    EXPECT_NEAR(r.phase_s.at("other"), r.steps.mean - marked, 1e-12) << text;
    EXPECT_EQ(to_json(r, false)["timing"]["phases_s"]["forward"].get<double>(),
              r.phase_s.at("forward"));
    // The stored config has threads resolved and round-trips.
    EXPECT_EQ(parse_config(r.config).get_int("threads"), r.threads);
    EXPECT_EQ(parse_config(r.config).str(), r.config);
  }
}

TEST(Runner, ThreadsComeFromTheConfig) {
  const RunResult r =
      run_config(parse_config("fc:layers=1,nodes=8,input=8,output=2,batch=2,threads=1"), quick());
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  apply_threads(0);
}

TEST(Runner, PredictsOomWithoutAllocating) {
  RunOptions o = quick();
  o.memory_limit = 1e6;  // 1 MB
  const RunResult r = run_config(parse_config("fc:layers=4,nodes=1024,batch=512"), o);
  EXPECT_EQ(r.status, Status::kOomPredicted);
  EXPECT_NE(r.error.find("estimated training memory"), std::string::npos);
  EXPECT_TRUE(r.step_times.empty());
}

TEST(Runner, Bf16RunsOrIsUnsupportedNeverCrashes) {
  for (const char* text : {"fc:layers=1,nodes=32,input=32,output=4,batch=8,dtype=bf16",
                           "rnn:cell=gru,layers=1,embed=8,length=3,vocab=16,batch=2,dtype=bf16"}) {
    const RunResult r = run_config(parse_config(text), quick());
    EXPECT_TRUE(r.status == Status::kOk || r.status == Status::kUnsupported)
        << text << ": " << to_string(r.status) << " " << r.error;
  }
}

TEST(Runner, MissingCudaIsUnsupported) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "CUDA present";
  const RunResult r = run_config(parse_config("fc:nodes=8,batch=2,device=cuda"), quick());
  EXPECT_EQ(r.status, Status::kUnsupported);
}

TEST(Runner, FixedStepsOption) {
  RunOptions o = quick();
  o.timing.fixed_steps = 12;
  const RunResult r = run_config(parse_config("fc:layers=1,nodes=8,input=8,output=2,batch=2"), o);
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(r.steps.steps, 12);
  EXPECT_EQ(r.steps.end_reason, "fixed-steps");
}

}  // namespace
}  // namespace tb
