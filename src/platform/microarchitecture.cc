#include "platform/microarchitecture.h"

#include <vector>

namespace tb {
namespace {

// Per-core fp32 FLOPs per cycle are FMA units x lanes x 2, as the vendors' optimization
// manuals give the units and datapath widths (Intel 64 and IA-32 Architectures Optimization
// Reference Manual; AMD Software Optimization Guides for Family 17h, 19h and 1Ah); the
// collected table in "FLOPs per cycle for Sandy Bridge and Haswell and others"
// (stackoverflow.com/questions/15655835) agrees. VDPBF16PS issues on the FMA ports at the FMA
// rate and does two products per fp32 lane: twice the fp32 figure. AMX's TDPBF16PS: 1024
// FLOPs per cycle per core (16x32 by 32x16 bf16 tiles in 16 cycles).
struct Entry {
  const char* vendor;
  int family;
  std::vector<int> models;                // cpuinfo "model" values; empty: any model of the family
  int first_model = -1, last_model = -1;  // or a range
  Microarchitecture arch;
};

const std::vector<Entry>& table() {
  static const char* kIntel = "Intel optimization reference manual";
  static const std::vector<Entry> t = {
      {"GenuineIntel",
       6,
       {63, 69, 70, 60, 61, 71, 79, 86, 78, 94, 142, 158, 165, 166},
       -1,
       -1,
       {"Haswell/Broadwell/Skylake (client)", 32, 0, 0, kIntel, ""}},
      {"GenuineIntel",
       6,
       {85},
       -1,
       -1,
       {"Skylake-SP/Cascade Lake/Cooper Lake", 64, 128, 0, kIntel,
        "Xeon Bronze, Silver and most Gold 5xxx have one 512-bit FMA unit per core: half this"}},
      {"GenuineIntel", 6, {106, 108}, -1, -1, {"Ice Lake-SP", 64, 0, 0, kIntel, ""}},
      {"GenuineIntel",
       6,
       {125, 126, 140, 141},
       -1,
       -1,
       {"Ice Lake/Tiger Lake (client)", 32, 0, 0, kIntel, ""}},
      {"GenuineIntel",
       6,
       {151, 154, 183, 186, 191},
       -1,
       -1,
       {"Alder Lake/Raptor Lake (P-cores)", 32, 0, 0, kIntel,
        "hybrid: the E-cores do half of this"}},
      {"GenuineIntel",
       6,
       {143, 207},
       -1,
       -1,
       {"Sapphire Rapids/Emerald Rapids", 64, 128, 1024, kIntel, ""}},
      {"GenuineIntel", 6, {173, 174}, -1, -1, {"Granite Rapids", 64, 128, 1024, kIntel, ""}},
      {"AuthenticAMD",
       23,
       {},
       0x00,
       0x2f,
       {"Zen/Zen+", 16, 0, 0, "AMD Software Optimization Guide for Family 17h", ""}},
      {"AuthenticAMD",
       23,
       {},
       0x30,
       0xff,
       {"Zen 2", 32, 0, 0, "AMD Software Optimization Guide for Family 17h Models 30h+", ""}},
      {"AuthenticAMD",
       25,
       {},
       0x00,
       0x0f,
       {"Zen 3", 32, 0, 0, "AMD Software Optimization Guide for Family 19h", ""}},
      {"AuthenticAMD",
       25,
       {},
       0x20,
       0x5f,
       {"Zen 3", 32, 0, 0, "AMD Software Optimization Guide for Family 19h", ""}},
      // Zen 4 runs AVX-512 on its two 256-bit FMA pipes: no more than AVX2 per cycle.
      {"AuthenticAMD",
       25,
       {},
       0x10,
       0x1f,
       {"Zen 4", 32, 64, 0, "AMD Software Optimization Guide for Family 19h Models 10h+", ""}},
      {"AuthenticAMD",
       25,
       {},
       0x60,
       0xaf,
       {"Zen 4", 32, 64, 0, "AMD Software Optimization Guide for Family 19h Models 10h+", ""}},
      {"AuthenticAMD",
       26,
       {},
       0x00,
       0xff,
       {"Zen 5", 64, 128, 0, "AMD Software Optimization Guide for Family 1Ah",
        "mobile Zen 5 parts run AVX-512 on 256-bit datapaths: half this"}},
  };
  return t;
}

}  // namespace

std::optional<Microarchitecture> find_microarchitecture(const std::string& vendor, int family,
                                                        int model) {
  for (const auto& e : table()) {
    if (vendor != e.vendor || family != e.family) continue;
    bool match = false;
    for (int m : e.models) match = match || m == model;
    if (e.models.empty()) match = model >= e.first_model && model <= e.last_model;
    if (match) return e.arch;
  }
  return std::nullopt;
}

}  // namespace tb
