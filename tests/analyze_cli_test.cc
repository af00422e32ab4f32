// `trainbench analyze`, `compare` and `report` as a user meets them: outputs in every
// format, and one-line errors with exit status 2 for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "store/sqlite.h"
#include "support/cli.h"
#include "support/files.h"
#include "support/synthetic_store.h"

namespace tb {
namespace {

using Output = ::tb::testing::CliOutput;
using ::tb::testing::run;

class AnalyzeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    store_ =
        new std::string(::testing::TempDir() + "/analyze-cli-" + std::to_string(getpid()) + ".db");
    std::remove(store_->c_str());
    auto s = Store::open(*store_);
    testing::fill_synthetic_store(*s, {});
  }
  static void TearDownTestSuite() {
    std::remove(store_->c_str());
    delete store_;
  }
  static std::string* store_;
};
std::string* AnalyzeCli::store_ = nullptr;

TEST_F(AnalyzeCli, ViewsPrintInEveryFormat) {
  const std::string& db = *store_;
  Output o = run("analyze sensitivity " + db);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("batch"), std::string::npos);
  EXPECT_NE(o.out.find("R^2"), std::string::npos);

  o = run("analyze heatmap " + db + " --x batch --y nodes --fix layers=1 --format csv");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out.substr(0, o.out.find('\n')),
            "batch,nodes,value,status,error,config,unstable,runs");
  EXPECT_NE(o.out.find("oom-predicted"), std::string::npos);

  o = run("analyze observations " + db + " --format json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_TRUE(j.at("context").at("trainbench").contains("git_revision")) << j.at("context").dump();
  EXPECT_FALSE(j.at("observations").empty());

  o = run("compare " + db + " --by platform --a slow --format csv");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out.substr(0, o.out.find('\n')), "config,a,b,speedup,unstable");

  o = run("analyze roofline " + db);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("ridge fp32"), std::string::npos);

  const std::string html =
      ::testing::TempDir() + "/analyze-cli-" + std::to_string(getpid()) + ".html";
  o = run("report " + db + " -o " + html + " --title 'a <b> test'");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("wrote " + html), std::string::npos);
  EXPECT_NE(::tb::testing::read_text(html).find("<title>a &lt;b&gt; test</title>"),
            std::string::npos);
  std::remove(html.c_str());
}

TEST_F(AnalyzeCli, BadInputIsOneLineAndExitTwo) {
  const std::string& db = *store_;
  // Where a refused report would have gone: none must be written.
  const std::string refused_html =
      ::testing::TempDir() + "/refused-" + std::to_string(getpid()) + ".html";
  const std::string empty_file =
                        ::testing::TempDir() + "/empty-" + std::to_string(getpid()) + ".db",
                    other_db = ::testing::TempDir() + "/other-" + std::to_string(getpid()) + ".db";
  std::ofstream(empty_file).flush();
  std::remove(other_db.c_str());
  ::tb::sql::Database(other_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
      .exec("CREATE TABLE x(a)");
  const std::pair<std::string, std::string> cases[] = {
      {"analyze nope " + db, "nope"},
      {"analyze sensitivity /nonexistent/x.db", "does not exist"},
      {"analyze box " + db + " --metric bogus", "unknown metric 'bogus'"},
      {"analyze heatmap " + db + " --x batch --y dtype", "'dtype' is not a numeric parameter"},
      {"analyze heatmap " + db + " --x batch --y nodes --fix layers", "'layers' is not key=value"},
      {"analyze heatmap " + db + " --x batch --y nodes --fix layers=99", "no run has layers=99"},
      {"analyze heatmap " + db + " --x batch --y nodes --fix colour=red", "cannot fix 'colour'"},
      {"analyze sensitivity " + db + " --family cnn", "no run of family 'cnn'"},
      // A metric no run has (fc has no model-FLOPs convention): named, not "too few runs".
      {"analyze sensitivity " + db + " --metric mfu", "none of its"},
      {"analyze heatmap " + db + " --x batch --y nodes --metric mfu", "ok runs has mfu"},
      {"analyze box " + db + " --metric mfu", "ok runs has mfu"},
      // Another view's option, which this one would ignore.
      {"analyze sensitivity " + db + " --x nodes", "--x is an option of analyze heatmap"},
      {"analyze box " + db + " --cells slice", "--cells is an option of analyze heatmap"},
      {"analyze heatmap " + db + " --by nodes", "--by is an option of analyze box"},
      {"analyze scaling " + db + " --metric step_mean_s",
       "--metric is an option of analyze sensitivity, heatmap, box, observations"},
      {"compare " + db + " --by platform --metric params", "has no speedup"},
      {"compare " + db + " --by platform --a slow --b nope", "no run has platform 'nope'"},
      {"compare " + db + " --by cell", "--by cell"},
      // A family no run has: refused by every view, not ignored or averaged over nothing.
      {"compare " + db + " --by platform --family bogus", "no run of family 'bogus'"},
      {"analyze roofline " + db + " --family bogus", "no run of family 'bogus'"},
      {"analyze observations " + db + " --family bogus", "no run of family 'bogus'"},
      {"analyze box " + db + " --family bogus", "no run of family 'bogus'"},
      {"report " + db + " -o " + refused_html + " --compare platform:slow",
       "'platform:slow' is not AXIS:A:B"},
      {"report " + db + " -o " + refused_html + " --metric speed", "unknown metric 'speed'"},
      // Checked though the store holds no emulations.
      {"report " + db + " -o " + refused_html + " --tta-platform nosuch",
       "unknown platform 'nosuch'"},
      {"report " + db + " -o " + refused_html + " --color bogus",
       "--color 'bogus': no run has that hyperparameter"},
      {"report " + std::string(TB_SOURCE_DIR) + "/README.md -o " + refused_html, "cannot read it"},
      // An empty file and an SQLite file of another program: said so, without SQLite's query.
      {"export " + empty_file, "'" + empty_file + "': not a trainbench results store"},
      {"export " + other_db, "'" + other_db + "': not a trainbench results store"},
  };
  ::tb::testing::run_cli_cases(cases, [](const auto& c, const Output& o) {
    const auto& [args, needle] = c;
    EXPECT_EQ(o.status, 2) << args << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\n" << o.err;
    EXPECT_EQ(o.out, "") << args;
  });
  EXPECT_FALSE(std::ifstream(refused_html).good()) << "a refused report wrote " << refused_html;
}

}  // namespace
}  // namespace tb
