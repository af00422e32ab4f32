#pragma once
#include <string>

namespace tb {

// "8GiB", "512 MiB", "2e9", "1.5G": bytes. Binary units (K, KiB, M, MiB, G, GiB, T, TiB) are
// powers of 1024, decimal ones (KB, MB, GB, TB) of 1000. Throws UsageError naming `flag` and the
// text for anything else, and for sizes that are not positive and finite.
double parse_bytes(const std::string& flag, const std::string& text);

}  // namespace tb
