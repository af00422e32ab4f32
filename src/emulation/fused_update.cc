#include "emulation/fused_update.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "numerics/update.h"

namespace tb::emu {
namespace {

std::atomic<bool> g_fused{true};
std::atomic<uint64_t> g_fused_steps{0};

// ATen's `p.add_(v, alpha)` is one fused multiply-add in its AVX2 and AVX-512 kernels; its
// baseline kernel multiplies and adds apart. The fused SGD step rounds once (numerics/update.h),
// so it is LibTorch's only where LibTorch runs those kernels: ATen 1.13 picks them where the
// CPU has AVX2 and FMA unless ATEN_CPU_CAPABILITY=default says otherwise (DispatchStub.cpp;
// LibTorch does not export its own answer).
bool aten_adds_with_fma() {
  static const bool fma = [] {
    const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
    if (forced && std::string(forced) == "default") return false;
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
  }();
  return fma;
}

bool plain(const torch::Tensor& t) {
  return t.defined() && t.layout() == torch::kStrided && t.scalar_type() == torch::kFloat &&
         t.device().is_cpu() && t.is_contiguous();
}

// LibTorch's scalar arguments as its float32 kernels take them: converted to float.
void unfused(MomentumRule rule, torch::Tensor& p, torch::Tensor& buf, const torch::Tensor& g,
             double momentum, double lr, const QuantPoint& state, const QuantPoint& master) {
  torch::NoGradGuard no_grad;
  buf.mul_(momentum).add_(g);
  if (rule == MomentumRule::kTorchSgd) {
    p.add_(buf, -1 * lr);
    state.apply_(buf);
  } else {
    state.apply_(buf);
    p.sub_(buf * lr);
  }
  master.apply_(p);
}

// A chunk's largest |x| bits, into a running maximum shared by the threads.
void fold_bits(std::atomic<uint32_t>& acc, uint32_t bits) {
  uint32_t cur = acc.load();
  while (bits > cur && !acc.compare_exchange_weak(cur, bits)) {
  }
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

void set_fused_updates(bool on) { g_fused = on; }
bool fused_updates() { return g_fused; }

bool fuses_momentum_step(const torch::Tensor& p, const torch::Tensor& buf, const torch::Tensor& g,
                         const QuantPoint& state, const QuantPoint& master) {
  // Tensors sharing memory would see each other's updates mid-chunk where the unfused
  // operators see whole tensors.
  return plain(p) && plain(buf) && plain(g) && p.sizes() == buf.sizes() && p.sizes() == g.sizes() &&
         !p.is_alias_of(buf) && !p.is_alias_of(g) && !buf.is_alias_of(g) &&
         state.rounds_in_chunks(buf) && master.rounds_in_chunks(p);
}

uint64_t fused_steps() { return g_fused_steps; }

void momentum_step(MomentumRule rule, torch::Tensor& p, torch::Tensor& buf, const torch::Tensor& g,
                   double momentum, double lr, const QuantPoint& state, const QuantPoint& master) {
  if (!g_fused || !fuses_momentum_step(p, buf, g, state, master) ||
      (rule == MomentumRule::kTorchSgd && !aten_adds_with_fma()))
    return unfused(rule, p, buf, g, momentum, lr, state, master);
  ++g_fused_steps;
  const int64_t n = p.numel();
  // The calls in the unfused order: the buffer's, then the parameter's.
  const ChunkRounding rs = state.chunk_rounding(buf), rm = master.chunk_rounding(p);
  if (n == 0) return;
  float* const P = p.data_ptr<float>();
  float* const B = buf.data_ptr<float>();
  const float* const G = g.data_ptr<float>();
  const float m = float(momentum), alpha = float(-1 * lr), lrf = float(lr);
  // Chunks of whole units of both roundings (1, a row, a band of NVFP4 tile rows: the tile
  // heights of the two points need not divide each other), ~16 KiB per tensor where the units
  // allow, so that a chunk stays in L1 from its update to its rounding.
  const int64_t unit = std::lcm(rs.unit, rm.unit);
  const int64_t chunk = unit * std::max<int64_t>(1, 4096 / unit);
  const int64_t chunks = (n + chunk - 1) / chunk;
  // Threads only for tensors of a million elements, as quantize_into splits them.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 20) / chunk);
  const auto over_chunks = [&](const auto& body) {
    at::parallel_for(0, chunks, grain, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) body(c * chunk, std::min(chunk, n - c * chunk));
    });
  };
  std::atomic<uint32_t> amax_s{0}, amax_m{0};
  // The NVFP4 roundings (tile scales from the whole tensor's amax) in a pass of their own.
  ChunkRounding ws = rs, wm = rm;
  const auto finish = [&] {
    ws.options.tensor_amax = as_float(amax_s.load());
    wm.options.tensor_amax = as_float(amax_m.load());
  };
  if (rule == MomentumRule::kTorchSgd) {
    // Both updates and both amaxes in one loop over the chunk; then the roundings that need no
    // amax, while the chunk is in L1.
    over_chunks([&](int64_t lo, int64_t len) {
      uint32_t ab = 0, ap = 0;
      num::momentum_add_amax(P + lo, B + lo, G + lo, size_t(len), m, alpha, &ab, &ap);
      if (rs.needs_amax)
        fold_bits(amax_s, ab);
      else
        rs.round(B, lo, len);
      if (rm.needs_amax)
        fold_bits(amax_m, ap);
      else
        rm.round(P, lo, len);
    });
    if (rs.needs_amax || rm.needs_amax) {
      finish();
      over_chunks([&](int64_t lo, int64_t len) {
        if (ws.needs_amax) ws.round(B, lo, len);
        if (wm.needs_amax) wm.round(P, lo, len);
      });
    }
  } else {
    // The parameter's update reads the rounded buffer: where that rounding needs the buffer's
    // amax, the update waits for a second pass. Amaxes are taken in the updates' own loops.
    const auto update_p = [&](int64_t lo, int64_t len) {
      if (rm.needs_amax) {
        uint32_t a = 0;
        num::sub_product_amax(P + lo, B + lo, size_t(len), lrf, &a);
        fold_bits(amax_m, a);
      } else {
        num::sub_product(P + lo, B + lo, size_t(len), lrf);
        rm.round(P, lo, len);
      }
    };
    over_chunks([&](int64_t lo, int64_t len) {
      if (rs.needs_amax) {
        uint32_t a = 0;
        num::momentum_buffer_amax(B + lo, G + lo, size_t(len), m, &a);
        fold_bits(amax_s, a);
        return;
      }
      num::momentum_buffer(B + lo, G + lo, size_t(len), m);
      rs.round(B, lo, len);
      update_p(lo, len);
    });
    if (rs.needs_amax) {
      finish();
      over_chunks([&](int64_t lo, int64_t len) {
        ws.round(B, lo, len);
        update_p(lo, len);
      });
    }
    if (rm.needs_amax) {
      finish();
      over_chunks([&](int64_t lo, int64_t len) { wm.round(P, lo, len); });
    }
  }
  // In-place changes, as LibTorch's in-place operators record them.
  p.unsafeGetTensorImpl()->bump_version();
  buf.unsafeGetTensorImpl()->bump_version();
}

}  // namespace tb::emu
