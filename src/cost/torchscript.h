#pragma once
// The `torchscript` family's input shapes (model/torchscript.cc, cost/torchscript.cc):
// `3x224x224+16` is two inputs, each without its batch dimension.
#include <cstdint>
#include <string>
#include <vector>

namespace tb {

// Throws UsageError naming the text.
std::vector<std::vector<int64_t>> parse_shapes(const std::string& text);
std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes);

}  // namespace tb
