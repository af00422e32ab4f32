#pragma once
#include <string>
#include <vector>

#include "platform/description.h"

namespace tb {

// Directories searched for platform descriptions, in order: $TRAINBENCH_PLATFORMS
// (colon-separated), ~/.config/trainbench/platforms (or $XDG_CONFIG_HOME's), then the
// registry shipped with trainbench (platforms/ in the source tree).
std::vector<std::string> platform_dirs();

// Every description found, first occurrence of a name winning. Malformed files are
// errors (UsageError naming file and field), not silently skipped.
std::vector<PlatformDescription> list_platforms();

// A registry name, or a path to a JSON file. Throws UsageError when not found.
PlatformDescription find_platform(const std::string& name_or_path);

}  // namespace tb
