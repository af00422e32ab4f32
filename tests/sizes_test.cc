#include "base/sizes.h"

#include <gtest/gtest.h>

#include "base/errors.h"

namespace tb {
namespace {

TEST(Sizes, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("--budget", "8GiB"), 8.0 * (1 << 30));
  EXPECT_EQ(parse_bytes("--budget", "1.5G"), 1.5 * (1 << 30));
  EXPECT_EQ(parse_bytes("--budget", "512 MiB"), 512.0 * (1 << 20));
  EXPECT_EQ(parse_bytes("--budget", "2e9"), 2e9);
  EXPECT_EQ(parse_bytes("--budget", "3GB"), 3e9);
  EXPECT_EQ(parse_bytes("--budget", "1TiB"), 1099511627776.0);
}

TEST(Sizes, BadSizesNameTheFlagAndTheText) {
  for (const char* bad : {"", "GiB", "8XB", "-1GiB", "0", "inf", "nan"}) {
    try {
      parse_bytes("--budget", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--budget " + std::string(bad)), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tb
