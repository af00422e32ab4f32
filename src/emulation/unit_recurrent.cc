// Recurrent cells written out step by step, so that an emulated unit, activation and number
// format reach the products and functions that LibTorch's fused kernels keep inside. Gate
// order and formulas are PyTorch's (torch.nn.RNN, LSTM, GRU documentation).
#include <fmt/format.h>

#include <optional>

#include "base/errors.h"
#include "emulation/emulate.h"

namespace tb::emu {
namespace {

namespace nn = torch::nn;
using Point = std::function<torch::Tensor(const torch::Tensor&)>;

torch::Tensor cell_tanh(const torch::Tensor& x, const Policy& p) {
  return p.ext_activation || p.activation == "tanh-pwl" ? emulated_activation(x, p)
                                                        : torch::tanh(x);
}
torch::Tensor cell_sigmoid(const torch::Tensor& x, const Policy& p) {
  return p.activation == "sigmoid-pwl" ? approx_activation(x, p.activation) : torch::sigmoid(x);
}

struct Weights {
  torch::Tensor w_ih, w_hh, b_ih, b_hh;  // biases undefined without bias
};

enum class Cell { kLstm, kGru, kTanh, kRelu };

struct Direction {
  torch::Tensor out, h, c;  // outputs [length, batch, hidden]; final state
};

// One direction of one layer over the whole sequence x [length, batch, in] from state (h0,
// c0) (undefined: zeros). With lengths, a sequence's state stops changing after its end
// (forward) or starts at it (reverse), and its outputs there are zero: what packed sequences
// give.
Direction run_direction(const torch::Tensor& x, const torch::Tensor& lengths, Cell cell,
                        const Weights& w, bool reverse, const torch::Tensor& h0,
                        const torch::Tensor& c0, const Policy& p, const Point& point) {
  const int64_t length = x.size(0), batch = x.size(1), hidden = w.w_hh.size(1);
  // The input products of every step at once: one large matrix product instead of length.
  const auto xi = unit_linear(point(x.reshape({length * batch, x.size(2)})), w.w_ih, w.b_ih, p)
                      .reshape({length, batch, -1});
  auto h = h0.defined() ? h0 : torch::zeros({batch, hidden}, x.options());
  auto c = c0.defined() ? c0 : torch::zeros({batch, hidden}, x.options());
  const auto ends = lengths.defined() ? lengths.to(x.device()).unsqueeze(1) : torch::Tensor();
  std::vector<torch::Tensor> out(length);
  for (int64_t s = 0; s < length; ++s) {
    const int64_t t = reverse ? length - 1 - s : s;
    const auto h_before = h, c_before = c;
    const auto hh = unit_linear(point(h), w.w_hh, w.b_hh, p);
    switch (cell) {
      case Cell::kLstm: {
        const auto g = (xi[t] + hh).chunk(4, 1);
        c = cell_sigmoid(g[1], p) * c + cell_sigmoid(g[0], p) * cell_tanh(g[2], p);
        h = cell_sigmoid(g[3], p) * cell_tanh(c, p);
        break;
      }
      case Cell::kGru: {
        const auto gi = xi[t].chunk(3, 1), gh = hh.chunk(3, 1);
        const auto r = cell_sigmoid(gi[0] + gh[0], p), z = cell_sigmoid(gi[1] + gh[1], p);
        const auto n = cell_tanh(gi[2] + r * gh[2], p);
        h = (1 - z) * n + z * h;
        break;
      }
      case Cell::kRelu:
        h = emulated_activation(xi[t] + hh, p);
        break;
      case Cell::kTanh:
        h = cell_tanh(xi[t] + hh, p);
        break;
    }
    if (ends.defined()) {
      const auto inside = ends > t;  // [batch, 1]
      h = torch::where(inside, h, h_before);
      c = torch::where(inside, c, c_before);
      out[t] = torch::where(inside, h, torch::zeros_like(h));
      continue;
    }
    out[t] = h;
  }
  return {torch::stack(out), h, c};
}

Cell cell_of(const nn::detail::RNNOptionsBase::rnn_options_base_mode_t& mode) {
  if (c10::get_if<torch::enumtype::kLSTM>(&mode)) return Cell::kLstm;
  if (c10::get_if<torch::enumtype::kGRU>(&mode)) return Cell::kGru;
  if (c10::get_if<torch::enumtype::kRNN_RELU>(&mode)) return Cell::kRelu;
  return Cell::kTanh;
}

const nn::detail::RNNOptionsBase* options_of(nn::Module& m) {
  if (auto* l = m.as<nn::LSTM>()) return &l->options_base;
  if (auto* g = m.as<nn::GRU>()) return &g->options_base;
  if (auto* r = m.as<nn::RNN>()) return &r->options_base;
  if (auto* s = dynamic_cast<RecurrentLayersImpl*>(&m)) return &s->options;
  return nullptr;
}

// A cell module's kind, if it is one.
std::optional<Cell> cell_module(nn::Module& m) {
  if (auto* s = dynamic_cast<RecurrentLayersImpl*>(&m); s && s->cell)
    return cell_of(s->options.mode());
  if (m.as<nn::LSTMCell>()) return Cell::kLstm;
  if (m.as<nn::GRUCell>()) return Cell::kGru;
  if (auto* r = m.as<nn::RNNCell>())
    return c10::get_if<torch::enumtype::kReLU>(&r->options.nonlinearity()) ? Cell::kRelu
                                                                           : Cell::kTanh;
  return std::nullopt;
}

}  // namespace

RecurrentResult unit_recurrent(const torch::Tensor& input, const torch::Tensor& lengths,
                               const RecurrentState& initial, nn::Module& cells, const Policy& p,
                               const Point& point) {
  const auto params = cells.named_parameters(/*recurse=*/false);
  auto param = [&](const std::string& name) {
    const auto* t = params.find(name);
    return t ? *t : torch::Tensor();
  };
  if (const auto cell = cell_module(cells)) {
    // One step: a sequence of length 1 from the given state.
    const Weights w{param("weight_ih"), param("weight_hh"), param("bias_ih"), param("bias_hh")};
    const Direction d =
        run_direction(input.unsqueeze(0), {}, *cell, w, false, initial.h, initial.c, p, point);
    return {d.h, {d.h, *cell == Cell::kLstm ? d.c : torch::Tensor()}};
  }
  const nn::detail::RNNOptionsBase* o = options_of(cells);
  if (!o) throw Unsupported(cells.name() + ": not a recurrent module or cell");
  if (o->proj_size() > 0)
    throw Unsupported(p.str() + ": LSTMs with a projection cannot run on the emulated unit");
  const Cell cell = cell_of(o->mode());
  torch::Tensor x = o->batch_first() ? input.transpose(0, 1) : input;
  const int directions = o->bidirectional() ? 2 : 1;
  std::vector<torch::Tensor> hs, cs;
  for (int64_t l = 0; l < o->num_layers(); ++l) {
    std::vector<torch::Tensor> outs;
    for (int d = 0; d < directions; ++d) {
      const std::string suffix = fmt::format("_l{}{}", l, d ? "_reverse" : "");
      const Weights w{param("weight_ih" + suffix), param("weight_hh" + suffix),
                      param("bias_ih" + suffix), param("bias_hh" + suffix)};
      const int64_t k = l * directions + d;
      const Direction r = run_direction(
          x, lengths, cell, w, d == 1, initial.h.defined() ? initial.h[k] : torch::Tensor(),
          initial.c.defined() ? initial.c[k] : torch::Tensor(), p, point);
      outs.push_back(r.out);
      hs.push_back(r.h);
      cs.push_back(r.c);
    }
    x = directions == 1 ? outs[0] : torch::cat(outs, 2);
    if (o->dropout() > 0 && l + 1 < o->num_layers())
      x = torch::dropout(x, o->dropout(), cells.is_training());
  }
  return {o->batch_first() ? x.transpose(0, 1) : x,
          {torch::stack(hs), cell == Cell::kLstm ? torch::stack(cs) : torch::Tensor()}};
}

}  // namespace tb::emu
