#pragma once
#include <optional>
#include <string>

namespace tb {

// What one core of a CPU microarchitecture can do per cycle at most, from the vendors'
// optimization manuals: the theoretical peak is this x cores x clock. The CPU reports its
// vendor, family and model (cpuinfo, from CPUID) but not its FMA units or datapath widths.
struct Microarchitecture {
  std::string name;
  double fp32_flops_per_cycle = 0;      // per core: FMA units x fp32 lanes x 2
  double bf16_flops_per_cycle = 0;      // per core with AVX512_BF16 (VDPBF16PS); 0 without
  double amx_bf16_flops_per_cycle = 0;  // per core with AMX (TDPBF16PS); 0 without
  std::string source;                   // the manual that says so
  std::string caveat;                   // SKUs of the same model that do less, if any
};

// The microarchitecture of a CPU from cpuinfo's vendor_id, "cpu family" and "model", or
// nullopt when this table does not know it (then the peak is a flag-based estimate).
std::optional<Microarchitecture> find_microarchitecture(const std::string& vendor, int family,
                                                        int model);

}  // namespace tb
