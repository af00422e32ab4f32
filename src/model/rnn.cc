// ParaDnn recurrent family: embedding(vocab, embed) -> `layers` stacked cells of
// width `embed` over `length` steps -> Linear to vocab; next-token labels.
// The cell type is a real parameter (the original code always built a basic RNN).
#include "model/activation_point.h"
#include "model/workload.h"

namespace tb {
namespace {

namespace nn = torch::nn;

struct RnnNetImpl : nn::Module {
  RnnNetImpl(const std::string& cell, int64_t layers, int64_t embed, int64_t vocab)
      : cell_type(cell) {
    embedding = register_module("embedding", nn::Embedding(vocab, embed));
    if (cell == "lstm") {
      lstm = register_module("cells", nn::LSTM(nn::LSTMOptions(embed, embed).num_layers(layers)));
    } else if (cell == "gru") {
      gru = register_module("cells", nn::GRU(nn::GRUOptions(embed, embed).num_layers(layers)));
    } else {
      rnn = register_module("cells", nn::RNN(nn::RNNOptions(embed, embed).num_layers(layers)));
    }
    head = register_module("head", nn::Linear(embed, vocab));
  }
  // tokens: [length, batch] -> logits [length * batch, vocab]
  torch::Tensor forward(const torch::Tensor& tokens, torch::Dtype dtype) {
    // Points at the cells' input and output; emulation runs the cells step by step with
    // points inside (recurrent_op), the plain model LibTorch's fused cells.
    auto x = activation_point(embedding->forward(tokens).to(dtype));
    torch::Tensor h;
    if (lstm) {
      h = recurrent_op(lstm, x);
    } else if (gru) {
      h = recurrent_op(gru, x);
    } else {
      h = recurrent_op(rnn, x);
    }
    return activation_point(layer_op(head, h.reshape({-1, h.size(2)})));
  }
  std::string cell_type;
  nn::Embedding embedding{nullptr};
  nn::LSTM lstm{nullptr};
  nn::GRU gru{nullptr};
  nn::RNN rnn{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(RnnNet);

class RnnWorkload : public Workload {
 public:
  explicit RnnWorkload(const Config& c)
      : net_(c.get("cell"), c.get_int("layers"), c.get_int("embed"), c.get_int("vocab")),
        batch_(c.get_int("batch")),
        length_(c.get_int("length")),
        vocab_(c.get_int("vocab")) {}
  torch::nn::Module& module() override { return *net_; }
  Batch make_batch(torch::Device device, torch::Dtype dtype, uint64_t seed) override {
    torch::manual_seed(seed);
    dtype_ = dtype;
    auto seq = torch::randint(0, vocab_, {length_ + 1, batch_},
                              torch::TensorOptions().device(device).dtype(torch::kLong));
    // Labels are the input shifted by one token.
    return {{seq.slice(0, 0, length_).contiguous()}, seq.slice(0, 1).reshape({-1})};
  }
  torch::Tensor loss(const Batch& b) override {
    return torch::nn::functional::cross_entropy(net_->forward(b.inputs[0], dtype_), b.target);
  }
  int64_t examples_per_step() const override { return batch_; }
  bool has_activation_points() const override { return true; }

 private:
  RnnNet net_;
  int64_t batch_, length_, vocab_;
  torch::Dtype dtype_ = torch::kFloat32;
};

const bool rnn_registered =
    (register_builder("rnn", [](const Config& c) { return std::make_unique<RnnWorkload>(c); }),
     true);

}  // namespace
}  // namespace tb
