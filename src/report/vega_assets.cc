#include "report/vega_assets.h"

// .incbin keeps the 800 KB of JavaScript out of the compiler's way: the assembler copies
// the files as they are. TB_VEGA_DIR is set by CMake, which also makes this object
// depend on the files.
#define TB_EMBED(sym, file)         \
  ".global " #sym "_begin\n" #sym   \
  "_begin:\n"                       \
  ".incbin \"" TB_VEGA_DIR "/" file \
  "\"\n"                            \
  ".global " #sym "_end\n" #sym "_end:\n"

asm(".pushsection .rodata\n" TB_EMBED(tb_vega_js, "vega.min.js")
        TB_EMBED(tb_vega_lite_js, "vega-lite.min.js")
            TB_EMBED(tb_vega_tooltip_js, "vega-tooltip.min.js") ".popsection\n");

extern "C" {
extern const char tb_vega_js_begin[], tb_vega_js_end[];
extern const char tb_vega_lite_js_begin[], tb_vega_lite_js_end[];
extern const char tb_vega_tooltip_js_begin[], tb_vega_tooltip_js_end[];
}

namespace tb {

const VegaAssets& vega_assets() {
  static const VegaAssets a{
      {tb_vega_js_begin, size_t(tb_vega_js_end - tb_vega_js_begin)},
      {tb_vega_lite_js_begin, size_t(tb_vega_lite_js_end - tb_vega_lite_js_begin)},
      {tb_vega_tooltip_js_begin, size_t(tb_vega_tooltip_js_end - tb_vega_tooltip_js_begin)},
      TB_VEGA_VERSIONS};
  return a;
}

}  // namespace tb
