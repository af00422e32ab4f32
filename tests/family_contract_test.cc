// The family contract, generated from the registry: every registered family (and every future
// one, with no list to edit) runs its schema's small `contract` config through each clause.
// A family exempt from a clause says why in its schema; the clause is then skipped with that
// reason, so ctest lists every exemption at the end of a run.
#include <gtest/gtest.h>

#include <algorithm>

#include "cost/cost.h"
#include "model/workload.h"
#include "runner/memory.h"
#include "runner/runner.h"
#include "spec/family.h"
#include "support/coverage.h"
#include "support/forward_profile.h"

namespace tb {
namespace {

std::vector<std::string> registered_families() {
  std::vector<std::string> out;
  for (const FamilySchema* s : family_schemas()) out.push_back(s->name);
  return out;
}

class FamilyContract : public ::testing::TestWithParam<std::string> {
 protected:
  const FamilySchema& schema() const { return *find_family_schema(GetParam()); }
  // The contract config's text, or (with a failure) the example when the schema has none.
  std::string contract_text() const {
    const FamilySchema& s = schema();
    if (s.contract.empty())
      ADD_FAILURE() << s.name << " declares no contract config (FamilySchema::contract)";
    return s.contract.empty() ? s.example : s.contract;
  }
  Config contract() const { return parse_config(contract_text()); }
  // True (and the test skipped, printing the reason) where the family is exempt.
  bool exempt(const std::string& clause) const {
    const auto it = schema().exemptions.find(clause);
    if (it == schema().exemptions.end()) return false;
    std::cout << "EXEMPT " << GetParam() << " " << clause << ": " << it->second << "\n";
    return true;
  }
};

TEST_P(FamilyContract, HasAContractConfigThatRoundTrips) {
  const FamilySchema& s = schema();
  ASSERT_FALSE(s.contract.empty()) << s.name << " declares no contract config";
  const Config c = parse_config(s.contract);
  EXPECT_EQ(c.family(), s.name);
  EXPECT_EQ(parse_config(c.str()).str(), c.str());
  EXPECT_EQ(parse_config(parse_config(s.example).str()).str(), parse_config(s.example).str());
  static const std::vector<std::string> clauses = {"cost", "parameters", "forward_flops", "memory",
                                                   "activation_points"};
  for (const auto& [clause, reason] : s.exemptions) {
    EXPECT_NE(std::find(clauses.begin(), clauses.end(), clause), clauses.end())
        << s.name << ": exemption from an unknown clause '" << clause << "'";
    EXPECT_FALSE(reason.empty()) << s.name << ": exemption from " << clause << " without a reason";
  }
}

TEST_P(FamilyContract, HasABuilderAndACostDescription) {
  const auto builders = families_with_builders();
  EXPECT_TRUE(std::binary_search(builders.begin(), builders.end(), GetParam()))
      << GetParam() << " has a schema but no builder (model/" << GetParam() << ".cc)";
  if (exempt("cost")) GTEST_SKIP() << schema().exemptions.at("cost");
  EXPECT_TRUE(has_cost(GetParam())) << GetParam() << " has no cost description";
}

TEST_P(FamilyContract, ParametersMatchTheBuiltModule) {
  if (exempt("parameters")) GTEST_SKIP() << schema().exemptions.at("parameters");
  const Config c = contract();
  auto w = build_workload(c);
  int64_t n = 0;
  for (const auto& p : w->module().parameters()) n += p.numel();
  EXPECT_EQ(step_cost(c).params, n) << c.str();
}

// LibTorch's profiler counts FLOPs of mm, addmm, bmm and conv2d: the cost description's
// forward GEMM and convolution FLOPs must agree within 1%.
TEST_P(FamilyContract, ForwardGemmFlopsMatchTheProfiler) {
  if (exempt("forward_flops")) GTEST_SKIP() << schema().exemptions.at("forward_flops");
  const Config c = contract();
  const double profiled = testing::profile_forward(c).matmul;
  const double modeled = step_cost(c).fwd_matmul_flops;
  ASSERT_GT(profiled, 0) << c.str();
  EXPECT_NEAR(modeled / profiled, 1.0, 0.01)
      << c.str() << " model " << modeled << " profiler " << profiled;
}

// Weights and gradients are parameters x dtype bytes, the optimizer's state what it holds:
// the memory estimate must match the measured categories to the byte.
TEST_P(FamilyContract, WeightsGradientsAndOptimizerBytesMatchTheEstimate) {
  if (exempt("memory")) GTEST_SKIP() << schema().exemptions.at("memory");
  const Config c = parse_config(contract_text() + ",threads=1");
  const MemoryRun run = measure_memory(c, MemoryOptions{});
  ASSERT_EQ(run.status, Status::kOk) << run.error;
  const MemoryBreakdown& m = run.breakdown;
  const StepCost cost = step_cost(c);
  EXPECT_EQ(m.params, cost.params);
  EXPECT_DOUBLE_EQ(m.peak[kWeights], cost.memory.weights);
  EXPECT_DOUBLE_EQ(m.peak[kGradients], cost.memory.gradients);
  EXPECT_DOUBLE_EQ(m.peak[kOptimizerState], cost.memory.optimizer_state);
}

// A family that declares activation points runs every Linear, Conv2d and recurrent module of
// its forward pass through them, and no such operator outside them.
TEST_P(FamilyContract, NoLayerEscapesTheActivationPoints) {
  if (exempt("activation_points")) GTEST_SKIP() << schema().exemptions.at("activation_points");
  const Config c = parse_config(contract_text() + ",threads=1");
  auto t = prepare_training(c, torch::kCPU, 1);
  if (!t.workload->has_activation_points())
    GTEST_SKIP() << GetParam() << " declares no activation points (numerics= is refused)";
  auto [layers, recurrent, weights] = testing::point_layers(*t.workload);
  layers.insert(recurrent.begin(), recurrent.end());
  ASSERT_FALSE(layers.empty());
  const testing::Coverage plain = testing::forward_coverage(*t.workload, t.batch, false);
  EXPECT_GE(plain.escaped.size(), layers.size()) << "the operator callback misses layers";
  const testing::Coverage covered = testing::forward_coverage(*t.workload, t.batch, true);
  EXPECT_TRUE(
      std::includes(covered.hooked.begin(), covered.hooked.end(), weights.begin(), weights.end()));
  EXPECT_EQ(covered.overridden, layers);
  EXPECT_TRUE(covered.escaped.empty())
      << *covered.escaped.begin() << " x" << covered.escaped.size() << " ran outside the points";
}

INSTANTIATE_TEST_SUITE_P(Registry, FamilyContract, ::testing::ValuesIn(registered_families()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace tb
