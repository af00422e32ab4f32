#pragma once
#include <string>

#include "record/emulation.h"

namespace tb {

// `trainbench emulate`'s table: the options and policy, one line per seed, what each rounding
// point did (analysis/rounding_table.h), then iterations to the target over the seeds (or why there
// is no mean).
std::string format_emulation(const emu::EmulationResult& r);

}  // namespace tb
