#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/errors.h"
#include "spec/sweep.h"

namespace tb {
namespace {

std::string error_of(const std::string& toml) {
  try {
    expand_sweep(parse_sweep(toml, "s.toml"), 1000000);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepSpec, RangesListsFixedValuesAndExclusions) {
  const SweepSpec s = parse_sweep(R"(
name = "t"
budget = 3
[[grid]]
family = "fc"
layers = [4, 8]
nodes = "32..256 x2"
input = "2000..8000 +2000"
output = 200
[[exclude]]
layers = 8
nodes = [128, 256]
)",
                                  "t.toml");
  EXPECT_EQ(s.budget_s, 3);
  ASSERT_EQ(s.grids.size(), 1u);
  EXPECT_EQ(s.grids[0].axes[1].values, (std::vector<std::string>{"32", "64", "128", "256"}));
  EXPECT_EQ(s.grids[0].axes[2].values, (std::vector<std::string>{"2000", "4000", "6000", "8000"}));
  const auto configs = expand_sweep(s);
  EXPECT_EQ(configs.size(), 2u * 4 * 4 - 1 * 2 * 4);
  std::set<std::string> unique;
  for (const auto& c : configs) {
    unique.insert(c.str());
    EXPECT_FALSE(c.get("layers") == "8" && (c.get("nodes") == "128" || c.get("nodes") == "256"));
    EXPECT_EQ(c.get("output"), "200");
  }
  EXPECT_EQ(unique.size(), configs.size());
}

TEST(SweepSpec, BuiltInParaDnnGridsAreTable2) {
  EXPECT_EQ(expand_sweep(find_sweep("paradnn-fc")).size(), 6u * 9 * 4 * 5 * 9);
  EXPECT_EQ(expand_sweep(find_sweep("paradnn-cnn-bottleneck")).size(), 8u * 3 * 3 * 3 * 5);
  EXPECT_EQ(expand_sweep(find_sweep("paradnn-lstm")).size(), 4u * 3 * 3 * 5 * 4);
  const SweepSpec fc = find_sweep("paradnn-fc");
  EXPECT_EQ(fc.grids[0].axes[4].values.front(), "64");
  EXPECT_EQ(fc.grids[0].axes[4].values.back(), "16384");
  for (const auto& name : builtin_sweep_names())
    EXPECT_NO_THROW(expand_sweep(find_sweep(name))) << name;
}

TEST(SweepSpec, MalformedFilesNameFileLineAndKey) {
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\nnodes = \"64..32 x2\"\n"),
            "s.toml:3: key 'nodes': empty range '64..32 x2'");
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\nnodez = 4\n"),
            "s.toml:3: key 'nodez': not a parameter of family 'fc'");
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\nnodes = []\n"),
            "s.toml:3: key 'nodes': empty list");
  EXPECT_NE(
      error_of("[[grid]]\nfamily = \"fc\"\nnodes = 1.5\n").find("s.toml:3: key 'nodes': expected"),
      std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\nnodes = [32, 0]\n").find("s.toml:3: key 'nodes'"),
            std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\ndtype = \"fp64\"\n").find("s.toml:3: key 'dtype'"),
            std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"mlp\"\n").find("s.toml:2: key 'family': unknown family"),
            std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\nnodes = \"32..64 x1\"\n").find("step must be"),
            std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\nnodes = \"32 to 64\"\n").find("s.toml:3"),
            std::string::npos);
  EXPECT_NE(error_of("budget = -1\n[[grid]]\nfamily = \"fc\"\n").find("s.toml:1: key 'budget'"),
            std::string::npos);
  EXPECT_NE(error_of("colour = 1\n[[grid]]\nfamily = \"fc\"\n")
                .find("s.toml:1: key 'colour': unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("name = \"x\"\n").find("no [[grid]]"), std::string::npos);
  // Settings the child would refuse are refused here, with their line.
  EXPECT_NE(error_of("target_ci = 1\n[[grid]]\nfamily = \"fc\"\n")
                .find("s.toml:1: key 'target_ci': must be in"),
            std::string::npos);
  EXPECT_NE(
      error_of("[[grid]]\nfamily = \"fc\"\n[[exclude]]\nnodez = 8\n").find("s.toml:4: key 'nodez'"),
      std::string::npos);
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\nnodes = \"1..9223372036854775807 x3\"\n")
                .find("s.toml:3: key 'nodes'"),
            std::string::npos);
  EXPECT_NE(error_of("[[grid]\nfamily=1").find("s.toml:1:"), std::string::npos);  // TOML syntax
  EXPECT_EQ(error_of("name = \"a\\u001b[31mb\"\n[[grid]]\nfamily = \"fc\"\n"),
            "s.toml:1: key 'name': 'a\\e[31mb' holds a control character (a line break, an "
            "escape)");
  // A value listed twice would make each of its configs twice.
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\nlayers = [1, 2, 1]\n"),
            "s.toml:3: key 'layers': value 1 is listed twice");
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\ndtype = [\"fp32\", \"fp32\"]\n"),
            "s.toml:3: key 'dtype': value fp32 is listed twice");
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"fc\"\nnodes = [\"64\", \"064\"]\n"),
            "s.toml:3: key 'nodes': value 064 is listed twice (064 is 64)");
  // A huge grid is refused before it is expanded.
  EXPECT_NE(error_of("[[grid]]\nfamily = \"fc\"\nlayers = \"1..4000 +1\"\nnodes = \"1..4000 +1\"\n")
                .find("more than"),
            std::string::npos);
  for (const std::string& bad : {"[[grid]]\nfamily = \"fc\"\nnodes = []\n", "[[grid]\n"}) {
    const std::string m = error_of(bad);
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// Two grids that share configs (here layers=2 with nodes 32): each config runs once, where it
// first appears.
TEST(SweepSpec, OverlappingGridsGiveEachConfigOnce) {
  const auto configs = expand_sweep(parse_sweep(R"(
[[grid]]
family = "fc"
layers = [1, 2]
nodes = 32
[[grid]]
family = "fc"
layers = 2
nodes = [32, 64]
)",
                                                "o.toml"));
  std::vector<std::string> names;
  for (const auto& c : configs) names.push_back(c.get("layers") + "x" + c.get("nodes"));
  EXPECT_EQ(names, (std::vector<std::string>{"1x32", "2x32", "2x64"}));
}

// Values that go together only in some combinations (gpt's d_model and heads): the others are
// left out of the sweep and listed with their reason; an exclusion rule drops one silently.
TEST(SweepSpec, CombinationsThatAreNoConfigAreLeftOutAndListed) {
  const std::string grid =
      "[[grid]]\nfamily = \"gpt\"\nlayers = 1\nd_model = [48, 64]\nheads = [3, 4]\n";
  std::vector<InvalidCell> invalid;
  const auto configs = expand_sweep(parse_sweep(grid, "s.toml"), 1000, &invalid);
  ASSERT_EQ(configs.size(), 3u);  // 48/3, 48/4 and 64/4
  ASSERT_EQ(invalid.size(), 1u);
  EXPECT_NE(invalid[0].config.find("d_model=64,heads=3"), std::string::npos) << invalid[0].config;
  EXPECT_EQ(invalid[0].reason, "gpt: d_model=64 is not divisible by heads=3");
  invalid.clear();
  EXPECT_EQ(expand_sweep(parse_sweep(grid + "[[exclude]]\nd_model = 64\nheads = 3\n", "s.toml"),
                         1000, &invalid)
                .size(),
            3u);
  EXPECT_TRUE(invalid.empty());
  EXPECT_EQ(error_of("[[grid]]\nfamily = \"gpt\"\nd_model = 64\nheads = [3, 6]\n"),
            "s.toml: no combination of the grid's values is a config: gpt: d_model=64 is not "
            "divisible by heads=3");
  // A value wrong on its own is still refused with its line.
  EXPECT_NE(error_of("[[grid]]\nfamily = \"gpt\"\nd_model = 64\nheads = [4, 0]\n")
                .find("s.toml:4: key 'heads'"),
            std::string::npos);
}

TEST(SweepSpec, FilterComparesNumbersAndWords) {
  const auto configs = expand_sweep(find_sweep("fc-cpu"));
  const Filter f = parse_filter("nodes>=256,batch=1024,layers!=8");
  size_t n = 0;
  for (const auto& c : configs)
    if (f.matches(c)) {
      ++n;
      EXPECT_GE(c.get_int("nodes"), 256);
      EXPECT_EQ(c.get_int("batch"), 1024);
      EXPECT_NE(c.get_int("layers"), 8);
    }
  EXPECT_EQ(n, 2u);
  EXPECT_FALSE(parse_filter("cell=lstm").matches(configs[0]));  // fc has no cell
  EXPECT_THROW(parse_filter("nodes~3"), UsageError);
  EXPECT_THROW(check_filter(parse_filter("nodez=8"), find_sweep("fc-cpu")), UsageError);
  EXPECT_NO_THROW(check_filter(parse_filter("nodes=8,family=fc"), find_sweep("fc-cpu")));
  EXPECT_THROW(parse_filter("nodes>="), UsageError);
  // A value the parameter cannot take is refused by name, not left to match nothing.
  const auto refusal = [](const std::string& filter) {
    try {
      check_filter(parse_filter(filter), find_sweep("fc-cpu"));
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("nodes=abc").find("'nodes=abc': nodes takes a whole number"),
            std::string::npos);
  EXPECT_NE(refusal("dtype=fp31").find("dtype is one of fp32"), std::string::npos)
      << refusal("dtype=fp31");
  EXPECT_NE(refusal("dtype<bf16").find("only = and != compare it"), std::string::npos);
  EXPECT_NE(refusal("family=cnn").find("family of"), std::string::npos);
  EXPECT_NE(refusal("nodes=\x1b").find("nodes=\\e"), std::string::npos) << refusal("nodes=\x1b");
  EXPECT_EQ(refusal("dtype!=bf16,nodes<1e3,batch>=64"), "accepted");
  EXPECT_NE(refusal("nodes=nan").find("takes a whole number"), std::string::npos);  // matched all
  EXPECT_NE(refusal("nodes>=1.5").find("takes a whole number"), std::string::npos);
}

TEST(SweepSpec, SamplingIsDeterministicAndCoversAxes) {
  const SweepSpec s = find_sweep("paradnn-fc");
  const auto all = expand_sweep(s);
  const auto a = sample_configs(all, s, 50, 7, true), b = sample_configs(all, s, 50, 7, true);
  ASSERT_EQ(a.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
  std::set<std::string> unique, batches;
  for (const auto& c : a) unique.insert(c.str()), batches.insert(c.get("batch"));
  EXPECT_EQ(unique.size(), 50u);
  EXPECT_EQ(batches.size(), 9u);  // a Latin hypercube of 50 points hits all 9 batch sizes
  EXPECT_NE(
      sample_configs(all, s, 50, 8, false)[0].str() + sample_configs(all, s, 50, 8, false)[1].str(),
      sample_configs(all, s, 50, 9, false)[0].str() +
          sample_configs(all, s, 50, 9, false)[1].str());
}

TEST(SweepSpec, AStratifiedSampleFillsEveryCellOfItsAxesEvenly) {
  const SweepSpec s = find_sweep("paradnn-fc");
  const auto all = expand_sweep(s);
  std::set<std::pair<std::string, std::string>> cells;
  for (const auto& c : all) cells.insert({c.get("nodes"), c.get("batch")});
  const size_t n = 2 * cells.size() + 3;
  const auto a = stratified_sample(all, n, 5, {"nodes", "batch"});
  ASSERT_EQ(a.size(), n);
  std::map<std::pair<std::string, std::string>, int> per_cell;
  std::set<std::string> unique;
  for (const auto& c : a) per_cell[{c.get("nodes"), c.get("batch")}] += 1, unique.insert(c.str());
  EXPECT_EQ(unique.size(), n);
  EXPECT_EQ(per_cell.size(), cells.size());
  int threes = 0;
  for (const auto& [cell, k] : per_cell) {
    EXPECT_TRUE(k == 2 || k == 3) << cell.first << "," << cell.second << ": " << k;
    threes += k == 3;
  }
  EXPECT_EQ(threes, 3);
  const auto b = stratified_sample(all, n, 5, {"nodes", "batch"});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
  // The other hyperparameters vary within a cell: not one slice.
  std::set<std::string> layers;
  for (const auto& c : a) layers.insert(c.get("layers"));
  EXPECT_GT(layers.size(), 1u);
  EXPECT_THROW(stratified_sample(all, n, 5, {"nodes", "nodez"}), UsageError);
}

TEST(SweepSpec, ShardsPartitionTheGrid) {
  const auto all = expand_sweep(find_sweep("rnn-cpu"));
  std::multiset<std::string> seen;
  for (int i = 1; i <= 3; ++i)
    for (const auto& c : shard(all, i, 3)) seen.insert(c.str());
  EXPECT_EQ(seen.size(), all.size());
  for (const auto& c : all) EXPECT_EQ(seen.count(c.str()), 1u);
  EXPECT_EQ(parse_shard("2/8"), (std::pair<int, int>(2, 8)));
  EXPECT_THROW(parse_shard("0/8"), UsageError);
  EXPECT_THROW(parse_shard("9/8"), UsageError);
  EXPECT_THROW(parse_shard("2"), UsageError);
}

}  // namespace
}  // namespace tb
