// JobSpec (jobs/job_spec.h): the child command line is written once, and the JSON form reads
// back to the same job.
#include "jobs/job_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/errors.h"

namespace tb {
namespace {

bool has_pair(const std::vector<std::string>& v, const std::string& flag,
              const std::string& value) {
  for (size_t i = 0; i + 1 < v.size(); ++i)
    if (v[i] == flag && v[i + 1] == value) return true;
  return false;
}
bool has(const std::vector<std::string>& v, const std::string& flag) {
  return std::find(v.begin(), v.end(), flag) != v.end();
}

TEST(JobSpec, ARunCarriesItsTimingSeedAndLimitsAndNothingItDoesNotSet) {
  JobSpec j;
  j.config = parse_config("fc:nodes=64,batch=16");
  j.timing.budget_s = 2.5;
  j.timing.target_rel_ci = 0.02;
  j.timing.fixed_steps = 40;
  j.seed = 7;
  j.memory_limit_gib = 1.5;
  const auto a = j.args();
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[0], "run");
  EXPECT_EQ(a[1], j.config.str());
  EXPECT_TRUE(has(a, "--json"));
  EXPECT_TRUE(has_pair(a, "--budget", "2.5"));
  EXPECT_TRUE(has_pair(a, "--target-ci", "0.02"));
  EXPECT_TRUE(has_pair(a, "--steps", "40"));
  EXPECT_TRUE(has_pair(a, "--seed", "7"));
  EXPECT_TRUE(has_pair(a, "--memory-limit", "1.5"));
  EXPECT_TRUE(has_pair(a, "--min-samples", std::to_string(SteadyStateOptions{}.min_samples)));
  EXPECT_TRUE(has_pair(a, "--min-time", "0.5"));
  for (const char* absent :
       {"--max-steps", "--stack", "--platform", "--peak-gflops", "--dist-timeout", "--bucket-mib"})
    EXPECT_FALSE(has(a, absent)) << absent;
}

TEST(JobSpec, DataParallelRanksGetTheCommunicationOptionsAndAStackIsPassed) {
  JobSpec j;
  j.config = parse_config("fc:nodes=64,batch=16,workers=2");
  j.dist.timeout_s = 12;
  j.dist.bucket_mib = 0.5;
  j.stack = parse_stack("stack:onednn=off");
  const auto a = j.args();
  EXPECT_TRUE(has_pair(a, "--dist-timeout", "12"));
  EXPECT_TRUE(has_pair(a, "--bucket-mib", "0.5"));
  EXPECT_TRUE(has_pair(a, "--stack", j.stack.str()));
}

TEST(JobSpec, AProfileJobIsTheProfileCommand) {
  JobSpec j;
  j.kind = JobSpec::Kind::kProfile;
  j.config = parse_config("fc:nodes=64,batch=16");
  j.profile_steps = 4;
  EXPECT_EQ(j.args(),
            (std::vector<std::string>{"profile", j.config.str(), "--json", "--steps", "4"}));
}

TEST(JobSpec, JsonRoundTripsToTheSameCommandLine) {
  JobSpec j;
  j.config = parse_config("fc:nodes=64,batch=16,workers=2");
  j.stack = parse_stack("stack:mode=torchscript");
  j.timing.budget_s = 0.75;
  j.timing.max_steps = 90;
  j.seed = 3;
  j.platform = "tpu-v2-board";
  j.peak_gflops = 120.5;
  j.dist.bucket_mib = 4;
  const JobSpec back = job_from_json(nlohmann::json::parse(j.to_json().dump()));
  EXPECT_EQ(back.args(), j.args());
  EXPECT_EQ(back.to_json(), j.to_json());
  JobSpec p;
  p.kind = JobSpec::Kind::kProfile;
  p.config = parse_config("cnn:image=32,batch=4");
  p.profile_steps = 2;
  EXPECT_EQ(job_from_json(p.to_json()).args(), p.args());
}

TEST(JobSpec, BadJsonIsAUsageErrorNamingTheField) {
  const auto message = [](const nlohmann::json& j) {
    try {
      job_from_json(j);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"kind", "train"}, {"config", "fc:batch=4"}}).find("kind 'train'"),
            std::string::npos);
  EXPECT_NE(message({{"kind", "run"}}).find("'config'"), std::string::npos);
  EXPECT_NE(message({{"config", "fc:batch=4"}, {"budget_s", "long"}}).find("'budget_s'"),
            std::string::npos);
  EXPECT_NE(message({{"config", "fc:batch=4"}, {"budget_s", -1}}).find("budget_s -1"),
            std::string::npos);
  EXPECT_NE(message({{"config", "nosuchfamily:batch=4"}}), "no error");
}

}  // namespace
}  // namespace tb
