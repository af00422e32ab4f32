#pragma once
#include <string>

namespace tb {

// Writes to a temporary file beside `path` and renames it over `path`, so a reader
// never sees a half-written result. Throws UsageError naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tb
