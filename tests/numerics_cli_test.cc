// trainbench quantize, formats and emulate as a user meets them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli.h"

namespace {

using Output = ::tb::testing::CliOutput;
using ::tb::testing::run;

using ::tb::testing::lines;

TEST(NumericsCli, QuantizePrintsValuesAndBitPatterns) {
  const Output o = run("quantize --format e4m3 -- 3.3 448 464 500 -0.07 1e-40");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("fp:e=4,m=3,bias=7,sub=on,special=fn,overflow=nan"), std::string::npos);
  EXPECT_NE(o.out.find("3.25             0 1000 101 0x45"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("448              0 1111 110 0x7e"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("nan              0 1111 111 0x7f"), std::string::npos) << o.out;
  // A float32 subnormal: the runtime's flush-to-zero must not swallow it before rounding.
  // Too long to show exactly in the column: the shortest text that reads back, marked ~.
  EXPECT_NE(o.out.find("1e-40~  0 "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("~ shortest text that reads back as the same float32"), std::string::npos);
  const Output t = run("quantize --format bf16 --rounding toward-zero 3.14159265");
  EXPECT_NE(t.out.find("3.140625"), std::string::npos) << t.out;
  const Output mx = run("quantize --format mxfp4_e2m1 0.1 0.2 3 5");
  EXPECT_NE(mx.out.find("E8M0 scale 2^0 (0x7f)"), std::string::npos) << mx.out;
  // NVFP4's two levels, so that a result can be checked by hand: amax 5 gives the decode scale
  // 5 / 2688; the block's amax x 2688 / 5 / 6 = 448, E4M3's largest; 3 -> E2M1 4 x 448 x 5/2688.
  const Output nv = run("quantize --format nvfp4 0.1 0.2 3 5");
  EXPECT_NE(nv.out.find("tensor amax 5, decode scale 0.0018601192~ (amax / (448 x 6))"),
            std::string::npos)
      << nv.out;
  EXPECT_NE(nv.out.find("block 0: amax 5, E4M3 scale 448"), std::string::npos) << nv.out;
  EXPECT_NE(nv.out.find("3 -> 3.3333335~"), std::string::npos) << nv.out;
}

// FORMAT@RECIPE: the values as a scaled point rounds them, beside the format unscaled. Values
// outside e4m3's [2^-9, 448]: unscaled, 1000 overflows (NaN in e4m3) and 1e-4 flushes to 0;
// scaled by 448 / 1000 per tensor, 1000 is kept (to float32's inverse) and 1e-4 still flushes;
// in tiles of two values each tile fits the range and nothing is lost.
TEST(NumericsCli, QuantizeWithARecipeShowsScaledBesideUnscaled) {
  Output o = run("quantize --format e4m3@current -- 1000 -3.5 0.01 0.0001");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("format e4m3 saturating, as a scaled point rounds it = "), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("overflow=sat, rounding nearest-even, scaling current"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("all values: amax 1000, scale 0.448 (448 / amax)"), std::string::npos)
      << o.out;
  // 1000 scaled to 448, code 0x7e, kept as 448 * (1 / 0.448); unscaled it is e4m3's NaN.
  EXPECT_NE(o.out.find("1000  448              0 1111 110 0x7e 999.99994~"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("scaled: 0 beyond the largest value, 1 nonzero to zero; unscaled: 1 "
                       "beyond the largest value, 1 nonzero to zero"),
            std::string::npos)
      << o.out;
  o = run("quantize --format e4m3@block:1x2 -- 1000 -3.5 0.01 0.0001");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("tile 1 (values 2-3): amax 0.01, scale 44800 (448 / amax)"),
            std::string::npos)
      << o.out;
  // Each scale says how it came about: a power of two, and 1 for a tile of zeros.
  o = run("quantize --format e4m3@block:1x2:pow2 -- 1000 -3.5 0 0");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("amax 1000, scale 0.25 (448 / amax, rounded down to a power of two)"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("amax 0, scale 1 (1 where the amax is 0, Inf or NaN)"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("scaled: 0 beyond the largest value, 0 nonzero to zero"), std::string::npos)
      << o.out;
  o = run("quantize --format e4m3@block:1x2 --json -- 1000 -3.5 0.01 0.0001");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["scaling"]["recipe"], "block:1x2");
  EXPECT_EQ(doc["scaling"]["tiles"].size(), 2u);
  EXPECT_EQ(doc["values"][0]["code"], 0x7e);
  EXPECT_TRUE(doc["values"][0]["unscaled"].is_null());  // NaN
  EXPECT_EQ(doc["counts"]["unscaled"]["overflow"], 1);
  EXPECT_EQ(doc["counts"]["scaled"]["underflow"], 0);
  // What a row of values cannot take: one line each, exit 2.
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"quantize --format e4m3@delayed:16 1", "delayed scaling takes its scale from earlier"},
           {"quantize --format mxfp8_e4m3@current 1", "block formats carry their own scales"},
           {"quantize --format e4m3@block:1x3 1 2 3 4", "3 columns do not divide"},
           {"quantize --format e4m3@sideways 1", "scaling 'sideways'"}}) {
    o = run(args);
    EXPECT_EQ(o.status, 2) << args << "\n" << o.out;
    EXPECT_NE(o.err.find(says), std::string::npos) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
  }
}

// A missed target is exit status 1 whether the output is a table or JSON; the JSON is whole.
TEST(NumericsCli, EmulateMissingTheTargetExitsOneInBothOutputs) {
  const std::string args =
      "emulate --seeds 1 --max-iters 20 --eval-every 10 --eval-examples 100 --target 0.99";
  const Output table = run(args);
  EXPECT_EQ(table.status, 1) << table.err;
  EXPECT_NE(table.out.find("not reached"), std::string::npos) << table.out;
  const Output json = run(args + " --json");
  EXPECT_EQ(json.status, 1) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["schema_version"].is_null(), false);
  EXPECT_EQ(doc["summary"]["reached"], 0) << json.out.substr(0, 400);
}

TEST(NumericsCli, QuantizePrintsValuesExactlyAndTakesValuesOnBothSidesOfDashes) {
  // fp16's 1 + 2^-9 and 2^-24 (its smallest subnormal), every digit.
  Output o = run("quantize --format fp16 1.001953125 5.9604644775390625e-8");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("1.001953125 "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("1.00195312 "), std::string::npos) << o.out;
  o = run("quantize --format fp16 --json 5.9604644775390625e-8 1e-40");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_TRUE(doc.contains("context"));
  EXPECT_EQ(doc["values"][0]["quantized_exact"], "0.000000059604644775390625");
  // float32's 1e-40 (a subnormal, 35681 x 2^-148) has 148 decimal places, all of them kept.
  const std::string in = doc["values"][1]["input_exact"];
  EXPECT_EQ(in.rfind("0.00000000000000000000000000000000000000009999946101114759", 0), 0u) << in;
  EXPECT_EQ(in.size(), 150u) << in;
  EXPECT_EQ(std::strtof(in.c_str(), nullptr), 1e-40f);
  // Negative values after `--`, in any order; a value before `--` is refused with the fix.
  for (const char* args :
       {"quantize --format e4m3 -- 448 -450", "quantize --format e4m3 -- -450 448"}) {
    o = run(args);
    ASSERT_EQ(o.status, 0) << args << "\n" << o.err;
    EXPECT_NE(o.out.find("-450"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("448 "), std::string::npos) << o.out;
    // `--json` after `--` is a value: refused as one, in one line.
    o = run(std::string(args) + " --json");
    EXPECT_EQ(o.status, 2) << args << o.out;
    EXPECT_NE(o.err.find("value '--json' is not a number"), std::string::npos) << o.err;
  }
  o = run("quantize --format e4m3 448 -- -450");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("put `--` before the first value"), std::string::npos) << o.err;
  // A finite number float32 cannot hold is refused, not read as Inf; inf itself is a value.
  o = run("quantize --format e4m3 -- -1e400");
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.err.find("value '-1e400' is beyond float32's range"), std::string::npos) << o.err;
  o = run("quantize --format e4m3 -- -inf 3.4028235e38 0x1p127");
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST(NumericsCli, FormatsListsEveryPreset) {
  const Output o = run("formats");
  ASSERT_EQ(o.status, 0);
  for (const char* n : {"fp32", "bf16", "fp16", "fp8_152", "fp16_169", "e4m3", "e5m2", "e3m4",
                        "e2m3", "e3m2", "e2m1", "mxfp8_e4m3", "mxfp4_e2m1", "bfp8", "int8"})
    EXPECT_NE(o.out.find(std::string("\n") + n + " "), std::string::npos) << n;
  EXPECT_NE(o.out.find("57344"), std::string::npos);
  EXPECT_NE(o.out.find("448"), std::string::npos);
  // No largest value is printed above what the format holds (q8.8's read as 128), and each
  // block format says what a NaN or Inf does to it.
  EXPECT_NE(o.out.find(" 127.99609375 "), std::string::npos) << o.out;
  for (const auto& [name, special] :
       std::vector<std::pair<std::string, std::string>>{{"mxfp8_e4m3", "NaN scale (MX)"},
                                                        {"nvfp4", "NaN kept, Inf saturates"},
                                                        {"bfp8", "NaN kept, Inf saturates"}}) {
    const auto at = o.out.find("\n" + name + " ");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_NE(o.out.substr(at, o.out.find('\n', at + 1) - at).find(special), std::string::npos)
        << name;
  }
}

TEST(NumericsCli, BadInputIsOneLineAndExitTwo) {
  const std::pair<const char*, const char*> cases[] = {
      {"quantize --format e9m9 1", "e9m9"},
      {"quantize --format e4m3 --rounding up 1", "rounding 'up'"},
      {"quantize --format e4m3 abc", "value 'abc'"},
      {"emulate --model resnet", "model 'resnet'"},
      {"emulate --weights q7", "q7"},
      {"emulate --loss-scale static:-1", "loss scale"},
      {"emulate --unit mad:order=random", "order=random"},
      {"emulate --unit ext:/nonexistent/lib.so", "cannot load extension"},
      {"emulate --activation softplus", "softplus"},
      {"emulate --weights e4m3@delayed:0", "history length '0'"},
      {"emulate --weights e4m3@weekly", "scaling 'weekly'"},
      {"emulate --weights mxfp8_e4m3@current", "element formats"},
      {"emulate --numerics rht:12", "rht size '12'"},
      {"emulate --numerics e4m3+rht:16 --unit mad:mul=e5m2,acc=fp16", "choose one"},
      {"emulate --model fc:layers=1,nodes=100,input=784,output=10 --numerics e4m3@block:1x32 "
       "--max-iters 2",
       ":e4m3@block:1x32': scaling 'block:1x32': 32 columns do not divide the tensor's rows of "
       "784"},
      {"emulate --activations e4m3@block:1x3 --max-iters 2", "'--activations e4m3@block:1x3': "},
      {"emulate --model fc:layers=1,nodes=100,input=784,output=10 --numerics w:mxfp8_e4m3 "
       "--max-iters 2",
       "'w:mxfp8_e4m3': mxfp8_e4m3: blocks of 32 do not divide the rows of 784 elements of a 100 "
       "x 784 tensor"},
      {"emulate --model fc:layers=1,nodes=100,input=784,output=10 --batch 8 "
       "--numerics a:nvfp4+rht:16 --max-iters 2",
       "rht:16: the layer's input has 8 rows (batch x tokens"},
      {"emulate --count-every -1", "count-every -1"},
      // A key that is neither a point nor a format kind is named as such.
      {"emulate --numerics w:e4m3+x:e5m2",
       "'x' in 'x:e5m2' is neither a point key (w, a, e, g, o, m"},
      {"quantize --format fixed:w=8 1", "fixed needs f= (fraction bits)"},
      {"quantize --format fp:e=4,m=3, 1", "an empty item (a stray comma?)"},
      {"quantize --format e4m3 --seed 5 0.3", "only stochastic rounding draws random bits"},
      {"platform --list --spec tpu-v2-board", "--list takes no --spec"},
      {"suite --models fc,fc --dry-run", "'fc' is named twice"},
      {"suite --list --models fc", "--list lists every model"},
      {"emulate --weights mx:elem=e4m3,scale=up", "scale=up"},
      {"emulate --dataset wikitext", "dataset 'wikitext'"},
      {"emulate --dataset gcide --target-loss -2", "target-loss -2"},
      {"emulate --target-loss 2", "--dataset gcide"},
      {"emulate --dataset gcide --model gpt:layers=1,vocab=300", "vocab=300"},
      {"emulate --dataset gcide --model gpt:layers=1,d_model=64,heads=2,vocab=256",
       "needs --target-loss"},
      {"emulate --dataset gcide --model fc:layers=1", "trains the gpt family"},
      {"emulate --dataset gcide --target 0.9", "--target 0.9"},
  };
  ::tb::testing::run_cli_cases(cases, [](const auto& c, const Output& o) {
    const auto& [args, needle] = c;
    EXPECT_EQ(o.status, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\n" << o.err;
  });
}

}  // namespace
