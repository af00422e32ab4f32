#pragma once
#include <string>
#include <vector>

#include "platform/description.h"

namespace tb {

// A platform description for a terminal: roofs, ridge points, and for a measured host
// the measured-vs-theoretical ratios and the trials behind them.
std::string format_platform(const PlatformDescription& p);
std::string format_platform_list(const std::vector<PlatformDescription>& ps);
// Attainable FLOP/s at the given intensities, per dtype.
std::string format_roofline(const PlatformDescription& p, const std::vector<double>& intensities);

}  // namespace tb
