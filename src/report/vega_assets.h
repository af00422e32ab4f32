#pragma once
// The chart libraries a report inlines (third_party/vega, pinned in its SOURCES file),
// compiled into trainbench so that writing a report needs nothing installed.
#include <string_view>

namespace tb {

struct VegaAssets {
  std::string_view vega, vega_lite, vega_tooltip;
  const char* versions;  // "vega 5.33.0, vega-lite 5.23.0, ...", from SOURCES
};
const VegaAssets& vega_assets();

}  // namespace tb
