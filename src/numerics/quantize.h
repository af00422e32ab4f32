// Quantizers: float32 in, float32 out holding the nearest (per the rounding mode) value of a
// format. Exact by construction: one rounding step, done on the float32 bit pattern in integer
// arithmetic, never through an intermediate format (no double rounding).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "numerics/format.h"

namespace tb::num {

struct QuantOptions {
  Rounding rounding = Rounding::kNearestEven;
  // Stochastic rounding: element i of the call draws from a counter-based generator keyed by
  // (seed, offset + i), so results do not depend on threads or chunking.
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Block formats: blocks never cross a row of this many elements (the innermost dimension
  // of a tensor); a short last block in a row is a block of its own. 0: one row.
  size_t row = 0;
  // NVFP4: the whole tensor's largest magnitude (NaN ignored), for its float32 scale. < 0: the
  // largest in this call. Callers splitting a tensor into several calls pass it.
  float tensor_amax = -1;
  // Float formats: each value is multiplied by `scale` before rounding and the result by
  // 1 / scale (both in float32): a scaling recipe's per-tensor scale (numerics/scaling.h).
  float scale = 1;
  // quantize(): when set, receives the input's largest magnitude (Inf counts, NaN does not:
  // tensor_amax's). Float formats take it tile by tile just before each tile is rounded, so the
  // input is read from memory once: Transformer Engine's fused cast and amax, with which
  // delayed scaling records a tensor's amax without a pass of its own; other formats in a pass
  // of their own. Results are unchanged. The per-block scaled entry points ignore it.
  float* input_amax = nullptr;
  int threads = 1;  // <= 0: std::thread::hardware_concurrency()
  // Outputs of more elements than this that do not overlap the input are written with
  // non-temporal stores, past the caches (same results). 0: the last-level cache's size.
  size_t stream_above = 0;
};

// The size (elements) above which an output is past the last-level cache: quantize() streams
// such outputs (QuantOptions::stream_above, 0, stands for it).
size_t stream_min_elements();

// Copies n floats with the stores quantize() uses for outputs past the last-level cache:
// non-temporal where the CPU has them, then a store fence. A reference copy for benchmarks.
// `ahead`: each input line 4 KiB on is requested as a line is loaded, as quantize()'s
// streaming kernels request theirs (where the CPU has AVX-512).
void copy_nontemporal(const float* in, float* out, size_t n, bool ahead = false);

// out may equal in.
void quantize(const Format& f, const float* in, float* out, size_t n, const QuantOptions& o = {});
std::vector<float> quantize(const Format& f, const std::vector<float>& in,
                            const QuantOptions& o = {});
float quantize_one(const Format& f, float x, Rounding r = Rounding::kNearestEven);

// A float format over consecutive blocks of `block` elements, block b at scale scales[b] (as
// quantize() with QuantOptions::scale = scales[b] and offset o.offset + b * block, on one
// thread): a per-block scaling recipe's rounding, with the format's grid built once.
// `stream`: the output is past the caches and does not overlap the input (a large tensor):
// written with non-temporal stores where the kernel can, then a store fence.
void quantize_blocks_scaled(const Format& f, const float* in, float* out, size_t n, size_t block,
                            const float* scales, const QuantOptions& o, bool stream = false);

// The largest magnitude (tensor_amax's) of each block of `block` elements of x[0, n), the
// last one possibly short, into out[b], or folded into it (the larger of the two) with `fold`:
// a per-block scaling recipe's tiles, a row of a tile at a time.
void block_amaxes(const float* x, size_t n, size_t block, float* out, bool fold);

// Bit patterns. encode() takes a value already in the format (a quantize() result) and
// returns its code in the low bits (float: sign, exponent, mantissa; fixed: two's complement
// word); NaN gives the format's NaN code, or -1 where the format has none.
int64_t encode(const Format& f, float q);
float decode(const FloatFormat& f, uint32_t code);
float decode(const FixedFormat& f, uint32_t code);

// Block formats: the shared exponent a block of values gets (BFP: the block's largest
// exponent; MX: the E8M0 scale's exponent, 255 standing for the NaN scale; NVFP4: -1, its
// scales are not powers of two).
int block_exponent(const BlockFormat& f, const float* x, size_t n);

// NVFP4's scales for one row of values as quantize() takes them (the whole call, so its tensor
// amax from the values): the float32 decode scale, and each 16-value block's amax and E4M3
// scale. A value's result is its E2M1 code x its block's scale x the decode scale.
struct Nvfp4Scales {
  float tensor_decode = 1;
  std::vector<float> block_amax, block_scale;
};
Nvfp4Scales nvfp4_scales(const float* x, size_t n);

// The largest magnitude of x[0, n), NaN ignored (fmax), Inf kept; on up to `threads` threads
// for large arrays.
float tensor_amax(const float* x, size_t n, int threads = 1);

// Whether no value of x[0, n) is Inf or NaN: a loop compiled for AVX-512 and AVX2 too (the
// emulation's overflow checks run over every weight gradient of a step).
bool all_finite(const float* x, size_t n);

// Calls fn(part, begin, end) for at most `threads` contiguous, nonempty ranges of [0, units), each
// on a std::thread of its own, and waits for them; one range runs on the calling thread.
void split_over_threads(size_t units, int threads,
                        const std::function<void(size_t, size_t, size_t)>& fn);

// Counter-based random bits used by stochastic rounding (exposed for tests).
uint32_t random_bits(uint64_t seed, uint64_t index);

}  // namespace tb::num
