// Schema and cost description of the diagnostic fault family (model/fault.cc): one 4x4 matmul.
#include "cost/layers.h"
#include "spec/family.h"

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

FamilySchema fault_schema() {
  FamilySchema s{"fault",
                 "diagnostic: misbehaves on purpose (segfault, abort, alloc, hang) to test sweeps",
                 {{"mode",
                   "what goes wrong; ok trains a 4x4 matrix",
                   "ok",
                   0,
                   0,
                   {"ok", "segfault", "abort", "alloc", "hang"}}},
                 "fault:mode=segfault"};
  for (auto& p : common_params(1)) s.params.push_back(p);
  s.contract = "fault:mode=ok";
  return s;
}

const bool registered =
    (register_family_schema(fault_schema()), register_cost("fault", fault_cost), true);

}  // namespace
}  // namespace tb
