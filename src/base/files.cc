#include "base/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/errors.h"

namespace tb {

namespace {
// A write the environment refused (a full disk, a read-only filesystem, an I/O error) is not
// bad input: StorageError, exit 3. Anything else (no such directory, no permission) is.
[[noreturn]] void refused(const std::string& path, int err) {
  const std::string what = "cannot write '" + path + "': " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EIO || err == EROFS || err == EFBIG)
    throw StorageError(what);
  throw UsageError(what);
}

// All of `content` into the open descriptor, or the errno of the write that failed.
int write_all(int fd, const std::string& content) {
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += size_t(n);
  }
  return 0;
}
}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);  // follows a symlink
  if (std::filesystem::is_directory(st))
    throw UsageError("cannot write '" + path + "': it is a directory, not a file");
  // A device, FIFO or socket (-o /dev/stdout, -o /dev/null) is written into: renaming a file
  // over it replaced the device node itself with a regular file.
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) refused(path, errno);
    const int err = write_all(fd, content);
    if (::close(fd) != 0 && !err) refused(path, errno);
    if (err) refused(path, err);
    return;
  }
  // Through a symlink, the file it names is replaced, not the link.
  std::filesystem::path target = path;
  for (int hops = 0;
       hops < 40 && std::filesystem::is_symlink(std::filesystem::symlink_status(target, ec));
       ++hops) {
    const auto next = std::filesystem::read_symlink(target, ec);
    if (ec) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const std::string tmp = target.string() + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) refused(path, errno);
  int err = write_all(fd, content);
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err) {
    std::remove(tmp.c_str());
    refused(path, err);
  }
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

void check_output_file(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  if (is_directory(path)) throw UsageError(what + " " + path + ": is a directory, not a file");
  // A device or FIFO is written into where it is (write_file_atomically): it must take writes;
  // its directory (/dev) need not take files.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    if (faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0)
      throw UsageError(what + " " + path + ": cannot be written (" + std::strerror(errno) + ")");
    return;
  }
  const auto parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!is_directory(dir))
    throw UsageError(what + " " + path + ": directory '" + dir + "' does not exist");
  // faccessat(AT_EACCESS) answers for the effective user and for read-only filesystems.
  if (faccessat(AT_FDCWD, dir.c_str(), W_OK, AT_EACCESS) != 0)
    throw UsageError(what + " " + path + ": directory '" + dir + "' cannot be written (" +
                     std::strerror(errno) + ")");
  // The permission bits do not say everything: root may write wherever they allow, yet /proc
  // takes no new file. A file made beside the output, as write_file_atomically (and SQLite's
  // journal) make theirs, and removed: `run -o /proc/x.json` ran its whole run before failing.
  std::string probe = path + ".probe.XXXXXX";  // a name of its own: no stale file is in its way
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw UsageError(what + " " + path + ": directory '" + dir + "' takes no new file (" +
                     std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace tb
