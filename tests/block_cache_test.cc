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
  void* freed_inside = nullptr;
  {
    const BlockCache cache;
    EXPECT_NE(c10::GetCPUAllocator(), before);
    EXPECT_THROW(BlockCache(), std::logic_error);  // one at a time
    kept = torch::full({4096}, 3.0f);
    auto gone = torch::empty({8192}, torch::kFloat32);
    freed_inside = gone.data_ptr();
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  EXPECT_EQ(kept.sum().item<float>(), 3.0f * 4096);
  kept = torch::Tensor();  // freed through the cache's deleter after the cache is gone
  // Nothing is cached any more: a new cache starts empty.
  const BlockCache cache;
  auto t = torch::empty({8192}, torch::kFloat32);
  EXPECT_EQ(cache.reused(), 0u);
  EXPECT_EQ(cache.fresh(), 1u);
  (void)freed_inside;
}

}  // namespace
}  // namespace tb
