#include "spec/config.h"

#include <gtest/gtest.h>

#include "base/errors.h"

namespace tb {
namespace {

TEST(Config, RoundTripsEveryFamilyExample) {
  for (const auto* s : family_schemas()) {
    const Config c = parse_config(s->example);
    EXPECT_EQ(parse_config(c.str()), c) << s->name;
    EXPECT_EQ(parse_config(c.str()).str(), c.str());
  }
}

TEST(Config, CanonicalFormFillsDefaultsInSchemaOrder) {
  const Config c = parse_config("fc:batch=64,nodes=32");
  EXPECT_EQ(c.str(),
            "fc:layers=4,nodes=32,input=2000,output=200,batch=64,dtype=fp32,optimizer=rmsprop,"
            "threads=0,device=cpu");
  EXPECT_EQ(c.get_int("nodes"), 32);
  EXPECT_EQ(parse_config("fc:nodes=0032,batch=+64"), c);  // numbers are canonicalized
}

TEST(Config, RejectsBadInputNamingFieldAndValue) {
  auto message = [](const std::string& text) {
    try {
      parse_config(text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("mlp:layers=4").find("unknown family 'mlp'"), std::string::npos);
  EXPECT_NE(message("fc:layer=4").find("unknown parameter 'layer'"), std::string::npos);
  EXPECT_NE(message("fc:nodes=0").find("nodes=0"), std::string::npos);
  EXPECT_NE(message("fc:nodes=-5").find("nodes=-5"), std::string::npos);
  EXPECT_NE(message("fc:nodes=abc").find("not an integer"), std::string::npos);
  EXPECT_NE(message("fc:nodes=12x").find("not an integer"), std::string::npos);
  EXPECT_NE(message("fc:batch=99999999999999999999").find("out of range"), std::string::npos);
  EXPECT_NE(message("fc:nodes=1e9").find("nodes=1e9"), std::string::npos);
  EXPECT_NE(message("fc:dtype=fp64").find("dtype=fp64"), std::string::npos);
  EXPECT_NE(message("cnn:block=dense").find("residual|bottleneck"), std::string::npos);
  EXPECT_NE(message("rnn:cell=transformer").find("rnn|lstm|gru"), std::string::npos);
  EXPECT_NE(message("fc:nodes=4,nodes=8").find("given twice"), std::string::npos);
  EXPECT_NE(message("fc:nodes").find("key=value"), std::string::npos);
  EXPECT_NE(message("fc:nodes=").find("empty value"), std::string::npos);
  EXPECT_NE(message(":nodes=4").find("missing family"), std::string::npos);
  EXPECT_NE(message("fc:device=gpu").find("device=gpu"), std::string::npos);
  EXPECT_NE(message("fc:device=cuda:99999999999999999999").find("device=cuda:9"),
            std::string::npos);
  EXPECT_EQ(parse_config("fc:device=cuda:00").get("device"), "cuda:0");  // one spelling per device
}

TEST(Config, SetKeepsOrderAndValidates) {
  Config c = parse_config("rnn:cell=gru");
  c.set("threads", "2");
  EXPECT_EQ(c.get("threads"), "2");
  EXPECT_EQ(parse_config(c.str()), c);
  EXPECT_THROW(c.set("threads", "-1"), UsageError);
  EXPECT_THROW(c.set("filters", "3"), UsageError);
}

}  // namespace
}  // namespace tb
