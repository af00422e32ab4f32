// Schema and cost description of the rnn family (model/rnn.cc).
#include <fmt/format.h>

#include "cost/layers.h"
#include "spec/family.h"

namespace tb {
namespace {

ModelCost rnn_cost(const Config& c, int64_t eb) {
  const int64_t B = c.get_int("batch"), layers = c.get_int("layers"), E = c.get_int("embed"),
                L = c.get_int("length"), V = c.get_int("vocab");
  const std::string cell = c.get("cell");
  ModelCost m;
  const double tokens = double(L) * B;
  auto emb = cost::embedding("embedding", tokens, V, E, eb);
  emb.saved_bytes = emb.output_bytes;  // the first layer's input projection keeps it
  m.layers.push_back(emb);
  for (int64_t i = 0; i < layers; ++i)
    m.layers.push_back(cost::recurrent(fmt::format("cells.{}", i), cell, B, L, E, E, eb));
  m.layers.push_back(cost::linear("head", tokens, E, V, eb, true));
  m.layers.back().keep_half_in_fp8 = true;
  m.layers.push_back(cost::softmax_xent("loss", tokens, V, eb));
  m.input_bytes = 8.0 * (L + 1) * B + 8.0 * tokens;  // token ids and shifted labels
  return m;
}

FamilySchema rnn_schema() {
  FamilySchema s{
      "rnn",
      "ParaDnn recurrent model: embedding -> stacked RNN/LSTM/GRU cells -> Linear(vocab)",
      {{"cell", "recurrent cell type", "rnn", 0, 0, {"rnn", "lstm", "gru"}},
       {"layers", "stacked recurrent layers", "1", 1, 1024, {}},
       {"embed", "embedding size = hidden width", "100", 1, 1 << 16, {}},
       {"length", "tokens per sequence", "10", 1, 1 << 16, {}},
       {"vocab", "vocabulary size", "1024", 2, 1 << 24, {}}},
      "rnn:cell=lstm,layers=1,embed=100,length=10,vocab=1024,batch=16,dtype=fp32"};
  for (auto& p : common_params(16)) s.params.push_back(p);
  s.contract = "rnn:cell=lstm,layers=2,embed=16,length=5,vocab=32,batch=3";
  return s;
}

const bool registered =
    (register_family_schema(rnn_schema()), register_cost("rnn", rnn_cost), true);

}  // namespace
}  // namespace tb
