#include "base/files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/errors.h"

// Output files are refused before any work where the directory takes no new file, whatever
// its permission bits say (root may write /proc's by them; /proc takes none).
TEST(OutputFiles, RefusedWhereTheDirectoryTakesNoNewFile) {
  const std::string dir = ::testing::TempDir() + "/outputs";
  std::filesystem::create_directories(dir);
  EXPECT_NO_THROW(tb::check_output_file("-o", dir + "/result.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/result.json")) << "the check left a file";
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the check left its probe";
  for (const std::string& bad :
       std::vector<std::string>{"/proc/x.json", dir, dir + "/missing/x.json"}) {
    try {
      tb::check_output_file("-o", bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const tb::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(bad), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}
