#pragma once
#include <string>
#include <vector>

#include "platform/description.h"

namespace tb {

// Directories searched for platform descriptions, in order: $TRAINBENCH_PLATFORMS
// (colon-separated), ~/.config/trainbench/platforms (or $XDG_CONFIG_HOME's), then the
// registry shipped with trainbench (platforms/ in the source tree).
std::vector<std::string> platform_dirs();

// Every description found, first occurrence of a name winning. A malformed file is left
// out and its one-line error added to `problems` (or thrown when `problems` is null).
std::vector<PlatformDescription> list_platforms(std::vector<std::string>* problems = nullptr);

// A registry name, or a path to a JSON file. Throws UsageError when not found.
PlatformDescription find_platform(const std::string& name_or_path);

}  // namespace tb
