#pragma once
// A user's TorchScript module through model/activation_point.h: its graphs are rewritten so
// that their layer operators call trainbench's operators (`trainbench::linear`, ...), which
// are the activation points and overrides emulation installs, and the plain LibTorch operator
// when none is installed.
#include <torch/script.h>

#include <string>
#include <vector>

namespace tb {

// Rewrites every graph of `m`'s compilation unit (methods of every submodule, free functions)
// before its first run: aten::linear, conv1d, conv2d, _convolution (traced convolutions),
// relu, relu_, relu6, relu6_, hardtanh (a clipped ReLU where its floor is 0), hardtanh_,
// matmul, mm, bmm, addmm, baddbmm, lstm, gru, rnn_tanh and rnn_relu on padded or packed
// sequences, their _cell, and the fused inference paths of nn.MultiheadAttention and
// nn.TransformerEncoderLayer (refused under points: training takes their composed ones,
// which are in the same graphs). Returns the layer operators left outside the points (transposed
// convolutions, einsum, outer...), each name once, in the order found;
// empty when every one reaches them.
std::vector<std::string> route_through_points(torch::jit::Module& m);

// The parameters of `m`'s Linear, Conv1d and Conv2d submodules (torch.nn's own classes),
// weight first, in module order: the layers that per-layer formats address.
std::vector<std::vector<torch::Tensor>> script_layers(const torch::jit::Module& m);

}  // namespace tb
