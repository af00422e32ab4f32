#pragma once
#include <string>

#include "record/memory.h"
#include "record/profile.h"

namespace tb {

// Terminal views of `trainbench profile` and `trainbench memory`.
std::string format_profile(const Profile& p, size_t top);
std::string format_utilization(const Utilization& u);
std::string format_memory(const MemoryBreakdown& m);
// The stacked breakdown per batch size (TBD Fig. 8) as bars, and what fits the budget.
std::string format_memory_sweep(const MemorySweep& s);

}  // namespace tb
