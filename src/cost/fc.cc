// Schema and cost description of the fc family (model/fc.cc); layer names follow the module's.
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost fc_cost(const Config& c, int64_t eb) {
  const int64_t B = c.get_int("batch"), layers = c.get_int("layers"), nodes = c.get_int("nodes"),
                input = c.get_int("input"), output = c.get_int("output");
  ModelCost m;
  int64_t in = input, index = 0;
  for (int64_t i = 0; i < layers; ++i) {
    m.layers.push_back(cost::linear(fmt::format("body.{}", index++), B, in, nodes, eb, i > 0));
    auto r = cost::relu(fmt::format("body.{}", index++), double(B) * nodes, eb);
    r.saved_bytes = r.output_bytes;  // kept by ReLU's backward and the next Linear's
    m.layers.push_back(r);
    in = nodes;
  }
  m.layers.push_back(cost::linear(fmt::format("body.{}", index), B, in, output, eb, layers > 0));
  m.layers.push_back(cost::softmax_xent("loss", B, output, eb));
  m.input_bytes = double(B) * input * eb + 8.0 * B;
  return m;
}

FamilySchema fc_schema() {
  FamilySchema s{
      "fc",
      "ParaDnn fully-connected: input -> layers x (Linear(nodes)+ReLU) -> Linear(output)",
      {{"layers", "hidden layers", "4", 1, 4096, {}},
       {"nodes", "units per hidden layer", "1024", 1, 1 << 20, {}},
       {"input", "input features", "2000", 1, 1 << 24, {}},
       {"output", "classes", "200", 1, 1 << 24, {}}},
      "fc:layers=4,nodes=1024,input=2000,output=200,batch=512,dtype=fp32"};
  for (auto& p : common_params(512)) s.params.push_back(p);
  s.contract = "fc:layers=1,nodes=8,input=16,output=4,batch=2";
  return s;
}

const bool registered = (register_family_schema(fc_schema()), register_cost("fc", fc_cost), true);

}  // namespace
}  // namespace tb
