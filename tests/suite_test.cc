// `trainbench suite`: the reference models' configs built from their schemas, and the
// command run through the sweep machinery (child processes, store, resumption).
#include "spec/suite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/errors.h"
#include "store/store.h"
#include "support/cli.h"
#include "support/config_texts.h"
#include "support/fake_reference.h"

namespace tb {
namespace {

using testing::config_texts;

TEST(Suite, DefaultConfigsOfEveryReferenceFamily) {
  testing::register_fake_reference();
  const auto refs = reference_families();
  ASSERT_FALSE(refs.empty());
  const auto configs = suite_configs({}, false);
  // one default config per model, then the named configs of generated families (gpt2-small)
  ASSERT_EQ(configs.size(), refs.size() + named_configs().size());
  const auto t = config_texts(configs);
  EXPECT_NE(std::find(t.begin(), t.end(), make_config("fake_reference", {}).str()), t.end());
  std::set<std::string> named;
  for (const auto* n : named_configs()) named.insert(parse_config(n->config).str());
  for (const auto& c : configs) {
    // no generated family but as a named config, no torchscript
    EXPECT_TRUE(c.schema().is_reference() || named.count(c.str())) << c.str();
    EXPECT_EQ(parse_config(c.str()), c);  // every row re-runs from its config
  }
  EXPECT_EQ(config_texts(suite_configs({"gpt2-small"}, true)),
            config_texts({parse_config("gpt2-small")}));
}

TEST(Suite, BatchSweepFollowsTheSchema) {
  testing::register_fake_reference();
  const auto configs = suite_configs({"fake_reference"}, true);
  ASSERT_EQ(configs.size(), 3u);  // batch_sweep {8, 2, 4}, run ascending
  EXPECT_EQ(configs[0].get("batch"), "2");
  EXPECT_EQ(configs[1].get("batch"), "4");
  EXPECT_EQ(configs[2].get("batch"), "8");
  for (const auto& c : configs) EXPECT_EQ(c.get("optimizer"), "momentum");  // its own default
  // The suite is a sweep: the same spec `trainbench sweep` expands.
  const SweepSpec spec = suite_sweep({"fake_reference"}, true);
  EXPECT_EQ(spec.name, "suite-batch");
  ASSERT_EQ(spec.grids.size(), 1u);
  EXPECT_EQ(config_texts(expand_sweep(spec)), config_texts(configs));
  // A family without a batch sweep runs at its default batch.
  EXPECT_EQ(config_texts(suite_configs({"fc"}, true)), config_texts({make_config("fc", {})}));
}

TEST(Suite, UnknownModelIsAUsageErrorNamingIt) {
  testing::register_fake_reference();  // ctest runs each test in a process of its own
  try {
    suite_configs({"fake_reference", "resnet5O"}, false);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'resnet5O'"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  EXPECT_EQ(split_models(" a, b, c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_models(" ").empty());
  // A stray comma or a name given twice is refused, not read as the list without it.
  for (const char* bad : {" a, b,,c ", "a,", "a,b,a"})
    EXPECT_THROW(split_models(bad), UsageError) << bad;
  EXPECT_EQ(suite_configs({"fake_reference", "fake_reference"}, false).size(), 1u);
}

TEST(SuiteCli, ListAndBadModel) {
  const auto list = testing::run_cli("suite --list");
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("model"), std::string::npos);
  EXPECT_NE(list.out.find("batch sweep"), std::string::npos);
  // Every model the default suite runs is listed: one line each after the header.
  const auto all = testing::run_cli("suite --dry-run");
  EXPECT_EQ(all.status, 0) << all.err;
  const auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  EXPECT_EQ(lines(list.out) - 1, lines(all.out) - 1) << list.out << all.out;
  const auto bad = testing::run_cli("suite --models fc,nosuchmodel --dry-run");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("'nosuchmodel'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  const auto dry = testing::run_cli("suite --models fc --batch-sweep --dry-run");
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_NE(dry.out.find(make_config("fc", {}).str()), std::string::npos) << dry.out;
}

// The binary has no reference families of its own in every build; a generated family
// named with --models goes through the same child-process machinery.
TEST(SuiteCli, RunsIntoAStoreAndResumes) {
  const std::string store = ::testing::TempDir() + "/suite-cli-" + std::to_string(getpid()) + ".db";
  std::remove(store.c_str());
  const std::string args = "suite --models fc --store " + store + " --budget 0.2 --timeout 300";
  const auto first = testing::run_cli(args);
  ASSERT_EQ(first.status, 0) << first.err;
  {
    auto s = Store::open(store);
    const auto runs = s->runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0]["status"], "ok") << runs[0].dump();
    EXPECT_EQ(runs[0]["sweep"], "suite");
    EXPECT_EQ(runs[0]["family"], "fc");
  }
  const auto again = testing::run_cli(args);
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("1 already in the store"), std::string::npos) << again.err;
  std::remove(store.c_str());
}

}  // namespace
}  // namespace tb
