// A number-format policy as config text (numerics/policy.h) and as a config value.
#include <gtest/gtest.h>

#include "base/errors.h"
#include "numerics/policy.h"
#include "spec/config.h"

namespace {

using tb::num::parse_numerics;

std::string error_of(const std::string& text) {
  try {
    parse_numerics(text);
  } catch (const tb::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(NumericsPolicy, TextRoundTripsCanonically) {
  EXPECT_TRUE(parse_numerics("fp32").is_fp32());
  EXPECT_EQ(parse_numerics("fp32").str(), "fp32");

  const auto all = parse_numerics("e4m3");
  for (const auto& p : all.points) EXPECT_EQ(p, "e4m3");
  EXPECT_EQ(all.str(), "e4m3");

  // Keys in any order come back in the canonical w, a, e, g, o, m, ls order.
  const auto mixed = parse_numerics("ls:dynamic:1024+g:e5m2+e:e5m2+a:e4m3+w:e4m3");
  EXPECT_EQ(mixed.weights(), "e4m3");
  EXPECT_EQ(mixed.activations(), "e4m3");
  EXPECT_EQ(mixed.errors(), "e5m2");
  EXPECT_EQ(mixed.weight_grads(), "e5m2");
  EXPECT_EQ(mixed.optimizer_state(), "off");
  EXPECT_EQ(mixed.master(), "off");
  EXPECT_EQ(mixed.loss_scale, "dynamic:1024");
  EXPECT_EQ(mixed.str(), "w:e4m3+a:e4m3+e:e5m2+g:e5m2+ls:dynamic:1024");
  EXPECT_EQ(parse_numerics(mixed.str()), mixed);

  // A later item overrides an earlier one; a uniform item sets all six points.
  const auto over = parse_numerics("bf16/stochastic+m:off");
  EXPECT_EQ(over.weights(), "bf16/stochastic");
  EXPECT_EQ(over.master(), "off");
  EXPECT_EQ(parse_numerics(over.str()), over);

  // Descriptors write their commas as ';' and keep them so.
  const auto fixed = parse_numerics("w:fixed:w=8;f=4");
  EXPECT_EQ(fixed.weights(), "fixed:w=8;f=4");
  EXPECT_EQ(tb::num::point_from_config(fixed.weights()), "fixed:w=8,f=4");
  EXPECT_EQ(tb::num::point_to_config("fixed:w=8,f=4"), "fixed:w=8;f=4");
  EXPECT_EQ(parse_numerics("ls:static:128").str(), "ls:static:128");
}

TEST(NumericsPolicy, PerLayerPointsWinOverGlobalOnesAndRoundTrip) {
  const auto p = parse_numerics("w.0:bf16+e4m3+a.2:off+ls:static:8");
  EXPECT_EQ(p.weights(), "e4m3");
  EXPECT_EQ(p.layers.at(0)[0], "bf16");
  EXPECT_EQ(p.layers.at(0)[1], "");  // layer 0's activations: the global point
  EXPECT_EQ(p.layers.at(2)[1], "off");
  EXPECT_EQ(p.str(), "e4m3+w.0:bf16+a.2:off+ls:static:8");
  EXPECT_EQ(parse_numerics(p.str()), p);
  EXPECT_TRUE(parse_numerics("w.3:off").is_fp32());
  EXPECT_EQ(parse_numerics("w.3:off").str(), "fp32");
  EXPECT_NE(error_of("w.x:e4m3").find("layer 'x'"), std::string::npos);
  EXPECT_NE(error_of("ls.1:dynamic").find("global"), std::string::npos);
  EXPECT_NE(error_of("w.0:e9m9").find("e9m9"), std::string::npos);
}

TEST(NumericsPolicy, BadTextNamesTheItem) {
  EXPECT_NE(error_of("w:e9m9").find("e9m9"), std::string::npos);
  EXPECT_NE(error_of("w:e9m9").find("numerics 'w:e9m9'"), std::string::npos);
  EXPECT_NE(error_of("a:bf16/sideways").find("sideways"), std::string::npos);
  EXPECT_NE(error_of("ls:dynamic:-1").find("dynamic:-1"), std::string::npos);
  EXPECT_NE(error_of("e4m3++w:bf16").find("empty item"), std::string::npos);
  EXPECT_NE(error_of("").find("numerics ''"), std::string::npos);
  EXPECT_NE(error_of("w:ext:").find("library path"), std::string::npos);
  EXPECT_EQ(error_of("w:ext:/some/lib.so"), "");  // loaded when the run starts, not here
}

TEST(NumericsPolicy, IsAConfigValueEveryFamilyTakes) {
  const auto c = tb::parse_config("fc:layers=1,nodes=8,numerics=g:e5m2+w:e4m3");
  EXPECT_EQ(c.get("numerics"), "w:e4m3+g:e5m2");
  EXPECT_NE(c.str().find(",numerics=w:e4m3+g:e5m2"), std::string::npos);
  EXPECT_EQ(tb::parse_config(c.str()), c);
  // At fp32 the key is left out, so results stored before it existed keep their text.
  const auto plain = tb::parse_config("fc:layers=1,nodes=8,numerics=fp32");
  EXPECT_EQ(plain.str().find("numerics"), std::string::npos);
  EXPECT_EQ(plain.get("numerics"), "fp32");
  EXPECT_EQ(tb::parse_config("resnet50:batch=2,numerics=bf16").get("numerics"), "bf16");
  EXPECT_THROW(tb::parse_config("fc:numerics=w:fixed:w=8,f=4"), tb::UsageError);
  EXPECT_THROW(tb::parse_config("cnn:numerics=nope"), tb::UsageError);
}

TEST(NumericsPolicy, ComputeFormatIsTheWidestOfWeightsActivationsAndErrors) {
  using tb::num::parse_numerics;
  EXPECT_EQ(parse_numerics("w:e4m3+a:e4m3+e:e5m2+g:e5m2").compute_format(), "e4m3");
  EXPECT_EQ(parse_numerics("w:e4m3+a:bf16+e:e5m2/stochastic").compute_format(), "bf16");
  EXPECT_EQ(parse_numerics("fixed:w=8;f=4").compute_format(), "fixed:w=8,f=4");
  // One of the three left in float32 (or opaque): no compute format of its own.
  EXPECT_EQ(parse_numerics("w:e4m3+a:e4m3").compute_format(), "");
  EXPECT_EQ(parse_numerics("fp32").compute_format(), "");
}

// The recipe names `simulate --format` takes mean the same places here, and a simulation of a
// config with numerics=amp-bf16 runs it as that recipe.
TEST(NumericsPolicy, RecipesExpandToTheirPlacesAndRoundTripByName) {
  const auto amp = parse_numerics("amp-fp16");
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(amp.points[i], "fp16") << i;
  EXPECT_EQ(amp.optimizer_state(), "off");
  EXPECT_EQ(amp.master(), "off");
  EXPECT_EQ(amp.loss_scale, "dynamic");
  EXPECT_EQ(amp.str(), "amp-fp16");
  EXPECT_EQ(amp.compute_format(), "amp-fp16");
  const auto bf = parse_numerics("amp-bf16");
  EXPECT_EQ(bf.weight_grads(), "bf16");
  EXPECT_EQ(bf.loss_scale, "none");
  EXPECT_EQ(bf.compute_format(), "amp-bf16");
  const auto tf = parse_numerics("tf32");
  EXPECT_EQ(tf.weights(), "tf32");
  EXPECT_EQ(tf.errors(), "tf32");
  EXPECT_EQ(tf.weight_grads(), "off");  // accumulated in fp32
  EXPECT_EQ(tf.str(), "tf32");
  // Later items refine a recipe, and what differs from it is written after its name.
  const auto fixed = parse_numerics("amp-fp16+ls:static:1024");
  EXPECT_EQ(fixed.loss_scale, "static:1024");
  EXPECT_EQ(fixed.str(), "amp-fp16+ls:static:1024");
  EXPECT_EQ(parse_numerics(fixed.str()), fixed);
  const auto none = parse_numerics("amp-fp16+ls:none");
  EXPECT_EQ(none.str(), "amp-fp16+ls:none");
  EXPECT_EQ(parse_numerics(none.str()), none);
  // The same places spelled out are the recipe.
  EXPECT_EQ(parse_numerics("w:bf16+a:bf16+e:bf16+g:bf16").str(), "amp-bf16");
  // A changed place is no longer the recipe.
  EXPECT_EQ(parse_numerics("amp-bf16+o:bf16").recipe(), "");
  EXPECT_EQ(tb::parse_config("fc:numerics=amp-bf16").get("numerics"), "amp-bf16");
}

// Per-tensor current scaling is part of a point: it round-trips, leaves the compute format
// alone, and a bad scaling is refused naming it.
TEST(NumericsPolicy, ScaledPointsRoundTripAndBadScalingsNameTheItem) {
  const auto p = parse_numerics("w:e4m3@current+a:e4m3@current+e:e5m2@current:1+g:e5m2@current");
  EXPECT_EQ(p.weights(), "e4m3@current");
  EXPECT_EQ(p.errors(), "e5m2@current:1");
  EXPECT_EQ(parse_numerics(p.str()), p);
  EXPECT_EQ(p.compute_format(), "e4m3@current");
  EXPECT_EQ(parse_numerics("e4m3/stochastic@current").compute_format(), "e4m3@current");
  // A recipe on a narrower point still reaches the simulator.
  EXPECT_EQ(parse_numerics("w:bf16+a:e4m3@current+e:e5m2").compute_format(), "bf16@current");
  const auto r = parse_numerics("a:e4m3@delayed:16:recent:1+e:e5m2@block:1x32:pow2+w:nvfp4_2d");
  EXPECT_EQ(r.activations(), "e4m3@delayed:16:recent:1");
  EXPECT_EQ(parse_numerics(r.str()), r);
  EXPECT_NE(error_of("w:e4m3@delayed:0").find("history length '0'"), std::string::npos)
      << error_of("w:e4m3@delayed:0");
  EXPECT_NE(error_of("w:e4m3@block:1x0").find("scaling 'block:1x0'"), std::string::npos)
      << error_of("w:e4m3@block:1x0");
  EXPECT_NE(error_of("w:e4m3@blocks").find("w:e4m3@blocks"), std::string::npos);
  EXPECT_NE(error_of("w:mxfp8_e4m3@current").find("element formats"), std::string::npos);
  EXPECT_NE(error_of("w:e4m3@current:123").find("scaling 'current:123'"), std::string::npos);
}

TEST(NumericsPolicy, OperatorsAreGlobalItemsThatRoundTrip) {
  using tb::num::parse_numerics;
  const auto p =
      parse_numerics("unit:mad:mul=e5m2;acc=fp16;width=4;order=lanes+w:e4m3+act:tanh-pwl");
  EXPECT_EQ(p.activation, "tanh-pwl");
  EXPECT_EQ(p.unit, "mad:mul=e5m2;acc=fp16;width=4;order=lanes");
  EXPECT_EQ(p.str(), "w:e4m3+act:tanh-pwl+unit:mad:mul=e5m2;acc=fp16;width=4;order=lanes");
  EXPECT_EQ(parse_numerics(p.str()), p);
  EXPECT_FALSE(parse_numerics("act:tanh").is_fp32());
  EXPECT_TRUE(parse_numerics("act:relu").is_fp32());
  auto refused = [](const std::string& text, const std::string& part) {
    try {
      parse_numerics(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const tb::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused("act:swish", "activation 'swish'");
  refused("act.0:tanh", "global");
  refused("unit:mad:mul=e9m9", "e9m9");
  refused("unit:ext:", "library path");
}

}  // namespace
