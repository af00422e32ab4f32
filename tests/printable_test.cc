// Messages that quote user input stay on one line and cannot drive a terminal
// (spec/printable.h), in every subcommand.
#include "spec/printable.h"

#include <gtest/gtest.h>

#include <random>

#include "support/cli.h"

namespace {

TEST(Printable, EscapesControlCharactersAndKeepsUtf8) {
  EXPECT_EQ(tb::printable("a\nb\rc\fd\te"), "a\\nb\\rc\\fd\\te");
  EXPECT_EQ(tb::printable("\x1b[2J\x1b[31mred"), "\\e[2J\\e[31mred");
  EXPECT_EQ(tb::printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(tb::printable("\x7f\x01"), "\\x7f\\x01");
  EXPECT_EQ(tb::printable("\xc2\x9b"
                          "31m"),
            "\\u009b31m");  // C1 CSI
  EXPECT_EQ(tb::printable("caf\xc3\xa9 \xce\xbc"
                          "s"),
            "caf\xc3\xa9 \xce\xbc"
            "s");
  EXPECT_EQ(tb::printable("plain text, 1.5 GiB"), "plain text, 1.5 GiB");
}

// The shell quotes the argument with $'...' so that control characters reach trainbench.
std::string ansi_c(const std::string& s) {
  std::string out = "$'";
  for (unsigned char c : s) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out + "'";
}

using ::tb::testing::lines;

TEST(Printable, RandomConfigStringsGiveOneLineErrors) {
  std::mt19937 rng(7);
  const std::string alphabet = "fcnrb:=,.0123456789layersnodesbatch\n\r\f\t\x1b[2J\x7f\x01 ";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), len(1, 30);
  std::vector<std::string> args;
  for (int i = 0; i < 40; ++i) {
    std::string text;
    for (size_t k = len(rng); k > 0; --k) text += alphabet[pick(rng)];
    if (i % 4 == 0) text = "fc:nodes=" + text;  // a known family, a bad value
    args.push_back("cost " + ansi_c(text));
  }
  int errors = 0;
  for (const auto& o : tb::testing::run_cli_all(args)) {
    ASSERT_TRUE(o.status == 0 || o.status == 2) << o.status << " " << o.err;
    if (o.status == 2) {
      ++errors;
      EXPECT_EQ(lines(o.err), 1) << o.err;
      EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err;
      EXPECT_EQ(o.err.find('\r'), std::string::npos) << o.err;
      EXPECT_EQ(o.err.find('\f'), std::string::npos) << o.err;
    }
  }
  EXPECT_GT(errors, 30);
}

TEST(Printable, EverySubcommandEscapesWhatItQuotes) {
  const std::string bad = ansi_c("x\ny\x1b[2Jz");
  const std::vector<std::string> all = {"run fc:nodes=" + bad,
                                        "cost " + bad,
                                        "sweep " + bad,
                                        "quantize --format " + bad + " 1",
                                        "simulate fc:batch=8 --platform " + bad,
                                        "analyze observations " + bad,
                                        "report " + bad,
                                        "profile fc:batch=" + bad,
                                        "memory " + bad,
                                        "emulate --model " + bad,
                                        bad,
                                        "run fc:batch=8 --stack " + bad};
  const auto outputs = tb::testing::run_cli_all(all);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& args = all[i];
    const auto& o = outputs[i];
    EXPECT_EQ(o.status, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << args;
  }
}

}  // namespace
