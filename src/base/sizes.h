#pragma once
#include <string>

namespace tb {

// "8GiB", "512 MiB", "2e9", "1.5G": bytes. Binary units (K, KiB, M, MiB, G, GiB, T, TiB) are
// powers of 1024, decimal ones (KB, MB, GB, TB) of 1000. Throws UsageError naming `flag` and the
// text for anything else, and for sizes that are not positive and finite.
double parse_bytes(const std::string& flag, const std::string& text);

// Bytes in binary units, three significant digits: "0 B", "812 B", "3.00 MiB", "21.8 MiB",
// "1010 MiB", "1.50 GiB". A value from 1000 to 1023 of a unit keeps its four digits rather
// than "1.01e+03 MiB"; a value below one unit's hundredth ("0.00 GiB") never occurs.
std::string bytes_iec(double bytes);

}  // namespace tb
