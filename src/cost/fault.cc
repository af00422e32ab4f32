// Cost description of the diagnostic fault family (model/fault.cc): one 4x4 matmul.
#include "cost/layers.h"

namespace tb {
namespace {

ModelCost fault_cost(const Config& c, int64_t eb) {
  ModelCost m;
  auto l = cost::linear("w", double(c.get_int("batch")), 4, 4, eb, false);
  l.params = 16;  // no bias
  m.layers.push_back(l);
  m.input_bytes = double(c.get_int("batch")) * 4 * eb;
  return m;
}

const bool registered = (register_cost("fault", fault_cost), true);

}  // namespace
}  // namespace tb
