#pragma once
#include <string>
#include <vector>

#include "record/emulation.h"

namespace tb {

// One line per rounding point (emu::summarize_scaling), each after `indent`: values rounded,
// the shares beyond the format's range and flushed to zero, NaN/Inf, the largest magnitude,
// the scales used.
std::string format_rounding(const std::vector<emu::ScalingSample>& points,
                            const std::string& indent = "");

}  // namespace tb
