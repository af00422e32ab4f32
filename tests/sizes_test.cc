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

// Three significant digits in every unit, without exponents and without a value that rounds
// to zero: what `memory` printed as "1.01e+03 MiB" and the OOM message as "0.00 GiB".
TEST(Sizes, PrintedWithThreeDigitsInBinaryUnits) {
  EXPECT_EQ(bytes_iec(0), "0 B");
  EXPECT_EQ(bytes_iec(812), "812 B");
  EXPECT_EQ(bytes_iec(1024), "1.00 KiB");
  EXPECT_EQ(bytes_iec(3.0 * (1 << 20)), "3.00 MiB");
  EXPECT_EQ(bytes_iec(2.9 * (1 << 20)), "2.90 MiB");
  EXPECT_EQ(bytes_iec(21.84 * (1 << 20)), "21.8 MiB");
  EXPECT_EQ(bytes_iec(1010.0 * (1 << 20)), "1010 MiB");
  EXPECT_EQ(bytes_iec(1.5 * (1 << 30)), "1.50 GiB");
  EXPECT_EQ(bytes_iec(3.0 * 1024), "3.00 KiB");
  EXPECT_EQ(bytes_iec(1e18), "888 PiB");
  // The round trip through parse_bytes lands within the printed precision.
  for (const double b : {1536.0, 5e6, 7.7e9})
    EXPECT_NEAR(parse_bytes("--budget", bytes_iec(b)), b, b * 5e-3) << bytes_iec(b);
}

}  // namespace
}  // namespace tb
