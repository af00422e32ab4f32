// The profiler's block cache (runner/block_cache.h): a freed block goes to the next tensor of
// its size, the allocator underneath is back once the cache is gone, and tensors outlive it.
#include "runner/block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>

namespace tb {
namespace {

TEST(BlockCache, AFreedBlockGoesToTheNextTensorOfItsSize) {
  const BlockCache cache;
  void* first = nullptr;
  {
    auto t = torch::empty({1000, 37}, torch::kFloat32);
    first = t.data_ptr();
  }
  auto other = torch::empty({999, 37}, torch::kFloat32);  // another size: a fresh block
  EXPECT_NE(other.data_ptr(), first);
  auto again = torch::empty({37, 1000}, torch::kFloat32);  // the same bytes: the same block
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(cache.reused(), 1u);
  EXPECT_EQ(cache.fresh(), 2u);
  // A tensor of the size still in use gets a block of its own.
  auto third = torch::empty({1000, 37}, torch::kFloat32);
  EXPECT_NE(third.data_ptr(), first);
}

TEST(BlockCache, TheAllocatorUnderneathIsBackAndTensorsOutliveTheCache) {
  c10::Allocator* before = c10::GetCPUAllocator();
  torch::Tensor kept;
  {
    const BlockCache cache;
    EXPECT_NE(c10::GetCPUAllocator(), before);
    EXPECT_THROW(BlockCache(), std::logic_error);  // one at a time
    kept = torch::full({4096}, 3.0f);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  EXPECT_EQ(kept.sum().item<float>(), 3.0f * 4096);
  // Freed while a later cache lives: that cache takes the block.
  const BlockCache cache;
  void* block = kept.data_ptr();
  kept = torch::Tensor();
  auto t = torch::empty({4096}, torch::kFloat32);
  EXPECT_EQ(t.data_ptr(), block);
  EXPECT_EQ(cache.reused(), 1u);
  EXPECT_EQ(cache.fresh(), 0u);
}

TEST(BlockCache, EmptyTensorsAreNeitherFreshNorReused) {
  const BlockCache cache;
  for (int i = 0; i < 3; ++i) auto t = torch::empty({0, 16}, torch::kFloat32);
  EXPECT_EQ(cache.fresh(), 0u);
  EXPECT_EQ(cache.reused(), 0u);
}

// Blocks are kept up to the most bytes alive at once (at least kMinCapBytes): past that a
// freed block goes back to the allocator underneath. Untouched tensors: no memory is written.
TEST(BlockCache, KeepsNoMoreThanWasAliveAtOnce) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t big = int64_t(BlockCache::kMinCapBytes) / 4 * 3 / 4;  // 3/4 of the cap
  const BlockCache cache;
  void* first = nullptr;
  {
    auto a = torch::empty({big}, torch::kFloat32);
    first = a.data_ptr();
  }                                                          // kept
  { auto b = torch::empty({big - kMiB}, torch::kFloat32); }  // over the cap: released
  EXPECT_EQ(cache.fresh(), 2u);
  { auto c = torch::empty({big - kMiB}, torch::kFloat32); }  // nothing kept of its size
  EXPECT_EQ(cache.fresh(), 3u);
  auto d = torch::empty({big}, torch::kFloat32);
  EXPECT_EQ(d.data_ptr(), first);
  EXPECT_EQ(cache.reused(), 1u);
}

}  // namespace
}  // namespace tb
