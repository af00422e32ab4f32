#pragma once
// Keeps the memory of freed CPU tensors for tensors of the same size while it lives, so that a
// profiled training step finds its blocks where an unprofiled one does.
//
// Why: LibTorch's profiler allocates its event records on the heap between a step's tensor
// allocations, and glibc carves those records out of the tensors' freed blocks. Two effects,
// measured on a 2-core VM (LibTorch 1.13, KINETO, CPU) with the fc config 784-256-256-10,
// batch 64, at 0.7 ms per unprofiled step:
//  - a freed tensor's block, once a record sits in it, no longer fits the next step's tensor
//    of that size, so the heap grows onto fresh pages that fault on first touch: the step read
//    3-5 ms profiled, 55-74% of it in the weight-gradient GEMM zeroing its fresh 800 KB output
//    (12 GFLOP/s where it runs at 160), and the process grew by that much every step with no
//    tensor kept alive;
//  - small blocks too: with only blocks of 16 KiB or more cached, the 10x256 weight's 10 KB
//    copy (a numerics `w:` point) still read 20 us of self time, and 6 us with every size
//    cached.
// A training step allocates the same sizes every step, so handing a freed block to the next
// request of its exact size ends both; with it that step read 0.8-1.0 ms profiled. The cache
// does little to an unprofiled step (fp32: 655 us with it against 660, one process).
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>

namespace tb {

// Installs the caching CPU allocator while it lives (one at a time); on destruction the
// previous allocator is back and the cached blocks are released. Freed blocks are kept up to
// as many bytes as were alive at once through this allocator since the cache was installed
// (at least kMinCapBytes): sizes that never come again fill the cache up to that and no more,
// and blocks freed beyond it go back to the allocator underneath. Tensors allocated through it
// and freed after it is gone are released normally.
class BlockCache {
 public:
  static constexpr size_t kMinCapBytes = size_t(64) << 20;

  BlockCache();
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Allocations (of one byte or more) served from a cached block, and from the allocator
  // underneath, since this cache was installed.
  uint64_t reused() const;
  uint64_t fresh() const;
};

}  // namespace tb
