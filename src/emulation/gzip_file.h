#pragma once
// The emulation phase's real data ships gzipped in Debian packages (Fashion-MNIST's IDX files;
// GCIDE's dictzip file, which is gzip with an index in its header).
#include <cstdint>
#include <string>
#include <vector>

namespace tb::emu {

// The whole decompressed file. Throws UsageError naming the path, and `remedy` (how to get the
// file) when it cannot be opened.
std::vector<uint8_t> read_gzip(const std::string& path, const std::string& remedy);

}  // namespace tb::emu
