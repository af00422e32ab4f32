#pragma once
// A momentum-SGD step fused with the rounding of its optimizer state and master weights.
// Unfused, a step with `o:` and `m:` points sweeps each parameter five times (LibTorch's buffer
// update, its parameter update, the buffer's rounding, the parameter's rounding, and NVFP4's
// amax passes besides); fused, one pass over cache-sized chunks does all of it (NVFP4: a second
// pass, after the amaxes), with the values of the unfused sequence bit for bit
// (numerics/update.h's arithmetic; NumericsTorch.FusedMomentumStepIsTheUnfusedSequence).
// The gradient's own rounding (`g:`) stays a pass of its own, before: rounded chunk by chunk
// inside this pass it made the fc config's step slower, not faster (g:mxfp8_e5m2: 832 us
// against 808, medians of 21 interleaved blocks in one process; NVFP4 likewise), though it
// saves a read and a write of the gradient; a chunk of each of four arrays in turn seems to
// keep the hardware prefetchers from running ahead the way one array at a time does.
#include <torch/torch.h>

#include "emulation/torch_quant.h"

namespace tb::emu {

enum class MomentumRule {
  // torch::optim::SGD with momentum, dampening 0, no Nesterov, no weight decay (the families'
  // `optimizer=momentum`, through the numerics wrapper): buf = buf * m + g; p += -lr * buf;
  // then the buffer rounded at `state`, the parameter at `master`.
  kTorchSgd,
  // emulate's models (emulate.cc): buf = buf * m + g; the buffer rounded at `state`;
  // p -= buf * lr; the parameter rounded at `master`.
  kRoundStateFirst,
};

// Whether momentum_step can fuse this parameter's update: contiguous float32 CPU tensors of
// one size that share no memory, and points that round in chunks
// (QuantPoint::rounds_in_chunks).
bool fuses_momentum_step(const torch::Tensor& p, const torch::Tensor& buf, const torch::Tensor& g,
                         const QuantPoint& state, const QuantPoint& master);

// One parameter's update and roundings, in place. Where fuses_momentum_step is false,
// fused_updates() is off, or (kTorchSgd) LibTorch runs its baseline kernels, whose
// `add_(v, alpha)` rounds twice, it runs the unfused sequence instead: the values are the same.
void momentum_step(MomentumRule rule, torch::Tensor& p, torch::Tensor& buf, const torch::Tensor& g,
                   double momentum, double lr, const QuantPoint& state, const QuantPoint& master);

// On by default; off runs every step unfused (the tests compare the two, and a benchmark can
// measure what fusing saves).
void set_fused_updates(bool on);
bool fused_updates();
// How many parameter updates have taken the fused path in this process (tests).
uint64_t fused_steps();

}  // namespace tb::emu
