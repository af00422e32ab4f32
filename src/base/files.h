#pragma once
#include <string>

namespace tb {

// Writes to a temporary file beside `path` (beside the file a symlink names) and renames it over
// `path`, so a reader never sees a half-written result. A device or FIFO (/dev/stdout) is
// written into instead. Throws StorageError naming the path where the environment refused the
// write (a full disk, a read-only filesystem), UsageError for other failures.
void write_file_atomically(const std::string& path, const std::string& content);

// Whether `path` names a directory (an ifstream opens one, and fails only when read).
bool is_directory(const std::string& path);

// Refuses, before any work, an output file that could not be written afterwards: `path` is a
// directory, or its directory does not exist or cannot be written. `what` names it in the
// message (an option such as "--out"). An empty path is no file: nothing to check.
void check_output_file(const std::string& what, const std::string& path);

}  // namespace tb
