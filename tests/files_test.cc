#include "base/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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

// A device is written into, never replaced: renaming a file over `-o /dev/full` had made the
// device node a regular file. A write the device refuses (a full disk's ENOSPC) is a
// StorageError (exit 3); /dev/null takes it. Through a symlink, the named file is replaced and
// the link stays.
TEST(OutputFiles, DevicesAreWrittenIntoAndSymlinksKept) {
  std::error_code ec;
  if (!std::filesystem::is_character_file("/dev/full", ec) ||
      !std::filesystem::is_character_file("/dev/null", ec))
    GTEST_SKIP() << "no /dev/full or /dev/null character device here";
  EXPECT_THROW(tb::write_file_atomically("/dev/full", "x\n"), tb::StorageError);
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
  EXPECT_NO_THROW(tb::check_output_file("-o", "/dev/null"));
  EXPECT_NO_THROW(tb::write_file_atomically("/dev/null", "x\n"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));

  const std::string dir = ::testing::TempDir() + "/outputs-link";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/real");
  std::filesystem::create_symlink(dir + "/real/r.json", dir + "/link.json");
  tb::write_file_atomically(dir + "/link.json", "{}\n");
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.json"));
  EXPECT_EQ(std::filesystem::file_size(dir + "/real/r.json"), 3u);
  try {
    tb::write_file_atomically(dir, "x");
    ADD_FAILURE() << "wrote over a directory";
  } catch (const tb::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  // A link into a directory that does not exist is refused before the work, as the write
  // (into the directory the link names) would fail after it.
  std::filesystem::create_symlink(dir + "/missing/r.json", dir + "/dangling.json");
  EXPECT_THROW(tb::check_output_file("-o", dir + "/dangling.json"), tb::UsageError);
  // A loop of links is refused, not replaced by a file.
  std::filesystem::create_symlink(dir + "/b.json", dir + "/a.json");
  std::filesystem::create_symlink(dir + "/a.json", dir + "/b.json");
  EXPECT_THROW(tb::write_file_atomically(dir + "/a.json", "x"), tb::UsageError);
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/a.json"));
  // A descriptor this process holds (/dev/stdout redirected with >>) is written through, at
  // its offset and with its flags: appended to, not rewritten from its start nor replaced.
  const std::string log = dir + "/log.txt";
  std::ofstream(log) << "before\n";
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  tb::check_output_file("-o", "/dev/fd/" + std::to_string(fd));
  tb::write_file_atomically("/dev/fd/" + std::to_string(fd), "after\n");
  ::close(fd);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "before\nafter\n");
  std::filesystem::remove_all(dir);
}
