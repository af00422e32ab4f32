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

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UsageError("cannot write '" + path + "': " + std::strerror(errno));
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw UsageError("cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw UsageError("cannot write '" + path + "': " + why);
  }
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

void check_output_file(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  if (is_directory(path)) throw UsageError(what + " " + path + ": is a directory, not a file");
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
