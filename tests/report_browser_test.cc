// The report in a real browser: headless Chromium (Debian's `chromium`) loads it offline,
// every chart must render, nothing may be logged as an error, and a screenshot is kept.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "report/html_report.h"
#include "store/store.h"
#include "support/files.h"
#include "support/synthetic_store.h"

namespace tb {
namespace {

using ::tb::testing::read_text;

std::string chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

int shell(const std::string& cmd) {
  const int raw = std::system(cmd.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ReportBrowser, EveryChartRendersWithoutConsoleErrors) {
  const std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh test installs it)";
  const std::string dir = ::testing::TempDir() + "/tb-browser-" + std::to_string(getpid());
  ASSERT_EQ(shell("mkdir -p " + dir), 0);
  const std::string store = dir + "/synthetic.db", html = dir + "/report.html";
  {
    auto s = Store::open(store);
    testing::SyntheticOptions o;
    o.reference = true;  // reference-model stars and the Reference models section too
    testing::fill_synthetic_store(*s, o);
    // Time to accuracy for both tasks (an accuracy and a loss target), with what rounding did:
    // its three charts.
    const int64_t p = s->platform_id({{"host", "h"}}, "h", nlohmann::json());
    const int64_t k = s->stack_id({{"blas", "x"}});
    const auto seed = [](int64_t n, bool loss) {
      nlohmann::json r = {{"seed", n},
                          {"iterations_to_target", 200 + 10 * n},
                          {"reached", true},
                          {"skipped_steps", 0},
                          {"final_loss_scale", 1.0},
                          {"seconds", 1.0}};
      r[loss ? "best_loss" : "best_accuracy"] = loss ? 1.6 : 0.86;
      r["curve"] = loss ? nlohmann::json::array({{100, 2.5}, {200 + 10 * n, 1.6}})
                        : nlohmann::json::array({{100, 0.7}, {200 + 10 * n, 0.86}});
      r["scaling"] = nlohmann::json::array({{{"point", "a"},
                                             {"iteration", 100},
                                             {"amax", 3.0},
                                             {"scale_min", 2.0},
                                             {"scale_max", 64.0},
                                             {"sites", 2},
                                             {"values", 1000},
                                             {"overflow", 1},
                                             {"underflow", 25},
                                             {"nonfinite", 0}}});
      return r;
    };
    for (const bool loss : {false, true}) {
      const std::string config =
          loss ? "gpt:layers=1,d_model=64,heads=2,seq=64,vocab=256,batch=64,optimizer=adamw"
               : "fashion-mnist-mlp:batch=64";
      nlohmann::json v = {{"model", loss ? config : "mlp"},
                          {"target", loss ? 1.66 : 0.86},
                          {"points", {{"activations", {{"format", "e4m3"}}}}},
                          {"loss_scale", "none"},
                          {"unit", ""},
                          {"activation", "relu"},
                          {"policy", "a:e4m3@current"},
                          {"format", "fp32"},
                          {"cost_config", config}};
      if (loss) v["metric"] = "loss", v["dataset"] = "gcide";
      s->add_emulation(v, {seed(1, loss), seed(2, loss)}, p, k);
    }
  }
  ReportOptions ro;
  ro.tta_platform = "tpu-v2-board";
  const ReportStats st = write_report({store}, html, ro);
  // sensitivity, heat maps, box, 2 rooflines, 3 comparison charts, 3 reference charts
  ASSERT_GE(st.charts, 11u);

  // A fresh profile per run; --virtual-time-budget lets the asynchronous rendering finish.
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars "
      "--user-data-dir=" +
      dir + "/profile --virtual-time-budget=20000 ";
  const std::string dom = dir + "/dom.html", log = dir + "/console.log";
  ASSERT_EQ(
      shell("timeout 120 " + browser + " " + flags +
            "--enable-logging=stderr --v=0 --dump-dom file://" + html + " > " + dom + " 2> " + log),
      0)
      << read_text(log);
  const std::string d = read_text(dom), console = read_text(log);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(d, m, std::regex("data-charts-rendered=\"([0-9]+)\"")))
      << "the page never finished";
  EXPECT_EQ(std::stoul(m[1]), st.charts);
  EXPECT_EQ(count(d, "data-rendered=\"1\""), st.charts);
  EXPECT_GE(count(d, "class=\"marks\""), st.charts);
  EXPECT_NE(d.find("id=\"chart-refthroughput\""), std::string::npos);
  EXPECT_NE(d.find("id=\"chart-refutil\""), std::string::npos);
  EXPECT_NE(d.find("id=\"chart-tta\""), std::string::npos);
  EXPECT_NE(d.find("id=\"chart-tta_loss\""), std::string::npos);
  EXPECT_NE(d.find("id=\"chart-tta_rounding\""), std::string::npos);
  // The page copies console errors and warnings into #tb-errors; it must stay empty.
  EXPECT_NE(d.find("<div id=\"tb-errors\"></div>"), std::string::npos)
      << d.substr(d.find("tb-errors"), 2000);
  // Chromium logs every console message as INFO:CONSOLE; uncaught exceptions say so.
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);)
    if (line.find(":CONSOLE") != std::string::npos)
      EXPECT_EQ(line.find("Uncaught"), std::string::npos) << line;

  const std::string shot = std::string(TB_BUILD_DIR) + "/report-screenshot.png";
  std::remove(shot.c_str());
  ASSERT_EQ(shell("timeout 120 " + browser + " " + flags + "--window-size=1400,3200 --screenshot=" +
                  shot + " file://" + html + " > /dev/null 2>&1"),
            0);
  std::ifstream png(shot, std::ios::binary);
  char sig[8] = {};
  png.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG") << "no screenshot at " << shot;
  shell("rm -rf " + dir);
}

}  // namespace
}  // namespace tb
