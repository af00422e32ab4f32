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

namespace {
// The descriptor a path names as an alias of one this process holds (/dev/stdout, /dev/fd/3,
// /proc/self/fd/1), or -1. Written through that descriptor, at its offset and with its flags
// (>> appends): reopened by name, the file behind it was rewritten from its start, and followed
// as a symlink to that file, it was replaced by a new one.
int held_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string p = prefix;
    if (path.compare(0, p.size(), p) != 0 || path.size() == p.size()) continue;
    const std::string n = path.substr(p.size());
    if (n.find_first_not_of("0123456789") != std::string::npos || n.size() > 9) return -1;
    return std::stoi(n);
  }
  return -1;
}

// Where an output path's content goes: the file a chain of symlinks ends at (a regular file,
// one to be made, a device or FIFO). Both the check before the work and the write take it, so
// that the check looks at the directory the write will use. A loop is refused (ELOOP).
std::filesystem::path output_target(const std::string& path) {
  std::error_code ec;
  std::filesystem::path target = path;
  for (int hops = 0;; ++hops) {
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(target, ec))) return target;
    if (hops == 40) throw UsageError("cannot write '" + path + "': " + std::strerror(ELOOP));
    const auto next = std::filesystem::read_symlink(target, ec);
    if (ec) return target;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
}
}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  if (const int fd = held_descriptor(path); fd >= 0) {
    // What this process printed to that descriptor comes first.
    std::fflush(nullptr);
    if (const int err = write_all(fd, content)) refused(path, err);
    return;
  }
  const std::filesystem::path target = output_target(path);
  std::error_code ec;
  const auto st = std::filesystem::status(target, ec);
  if (std::filesystem::is_directory(st))
    throw UsageError("cannot write '" + path + "': it is a directory, not a file");
  // A device, FIFO or socket (-o /dev/null) is written into: renaming a file over it replaced
  // the device node itself with a regular file.
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    std::fflush(nullptr);
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) refused(path, errno);
    const int err = write_all(fd, content);
    if (::close(fd) != 0 && !err) refused(path, errno);
    if (err) refused(path, err);
    return;
  }
  // Through a symlink, the file it names is replaced, not the link.
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
  // A descriptor this process holds (/dev/stdout) is written through as it is.
  if (held_descriptor(path) >= 0) return;
  // A device or FIFO is written into where it is (write_file_atomically): it must take writes;
  // its directory (/dev) need not take files. Through symlinks, the directory checked is the
  // one the write will use.
  const std::filesystem::path target = output_target(path);
  std::error_code ec;
  const auto st = std::filesystem::status(target, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    if (faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0)
      throw UsageError(what + " " + path + ": cannot be written (" + std::strerror(errno) + ")");
    return;
  }
  const auto parent = target.parent_path();
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
  std::string probe = target.string() + ".probe.XXXXXX";  // its own name: no stale file in its way
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw UsageError(what + " " + path + ": directory '" + dir + "' takes no new file (" +
                     std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace tb
