#include "runner/block_cache.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tb {
namespace {

// The wrapper around LibTorch's CPU allocator. One for the process, never destroyed: a block
// it handed out must come back through it even after the BlockCache is gone.
class CachingAllocator final : public c10::Allocator {
 public:
  static CachingAllocator& instance() {
    static auto* a = new CachingAllocator();
    return *a;
  }

  c10::DataPtr allocate(size_t n) const override {
    auto& self = const_cast<CachingAllocator&>(*this);
    c10::Allocator* base = nullptr;
    {
      std::lock_guard<std::mutex> lock(self.mu_);
      base = base_;
      if (active_ && n > 0) {
        auto it = self.free_.find(n);
        if (it != self.free_.end() && !it->second.empty()) {
          c10::DataPtr inner = std::move(it->second.back());
          it->second.pop_back();
          self.cached_bytes_ -= n;
          ++self.reused_;
          return self.hand_out(std::move(inner), n);
        }
        ++self.fresh_;
      }
    }
    c10::DataPtr inner = base->allocate(n);
    if (!inner.get()) return inner;  // 0 bytes: no memory to reuse or count
    std::lock_guard<std::mutex> lock(self.mu_);
    return self.hand_out(std::move(inner), n);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CachingAllocator::release; }

  static void release(void* p) { instance().free(p); }

  void free(void* p) {
    c10::DataPtr gone;  // released after the lock is
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // cannot happen: only our pointers come here
    Live& l = it->second;
    live_bytes_ -= l.bytes;
    if (active_ && cached_bytes_ + l.bytes <= std::max(BlockCache::kMinCapBytes, peak_bytes_)) {
      cached_bytes_ += l.bytes;
      free_[l.bytes].push_back(std::move(l.inner));
    } else {
      gone = std::move(l.inner);
    }
    live_.erase(it);
  }

  void install() {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_) throw std::logic_error("one BlockCache at a time");
    // base_ only once the checks pass: a base_ that is this allocator would call itself.
    c10::Allocator* base = c10::GetCPUAllocator();
    if (base == this) throw std::logic_error("the caching allocator is already installed");
    c10::SetCPUAllocator(this, /*priority=*/0);
    if (c10::GetCPUAllocator() != this)
      throw std::runtime_error("could not install the caching CPU allocator");
    base_ = base;
    active_ = true;
    reused_ = fresh_ = 0;
    peak_bytes_ = live_bytes_;
  }

  void uninstall() {
    std::unordered_map<size_t, std::vector<c10::DataPtr>> gone;
    std::lock_guard<std::mutex> lock(mu_);
    // Another wrapper installed over this one (a MemoryTracker) stays in place.
    if (c10::GetCPUAllocator() == this) c10::SetCPUAllocator(base_, /*priority=*/0);
    active_ = false;
    gone.swap(free_);
    cached_bytes_ = 0;
  }

  uint64_t reused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reused_;
  }
  uint64_t fresh() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fresh_;
  }

 private:
  struct Live {
    c10::DataPtr inner;
    size_t bytes;
  };

  // The context is the pointer itself, so raw_allocate()/raw_deleter() work too.
  c10::DataPtr hand_out(c10::DataPtr inner, size_t n) {
    void* p = inner.get();
    const c10::Device device = inner.device();
    live_bytes_ += n;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    live_.emplace(p, Live{std::move(inner), n});
    return {p, p, &CachingAllocator::release, device};
  }

  mutable std::mutex mu_;
  c10::Allocator* base_ = nullptr;
  bool active_ = false;
  std::unordered_map<void*, Live> live_;
  std::unordered_map<size_t, std::vector<c10::DataPtr>> free_;
  size_t live_bytes_ = 0, peak_bytes_ = 0, cached_bytes_ = 0;
  uint64_t reused_ = 0, fresh_ = 0;
};

}  // namespace

BlockCache::BlockCache() { CachingAllocator::instance().install(); }
BlockCache::~BlockCache() { CachingAllocator::instance().uninstall(); }
uint64_t BlockCache::reused() const { return CachingAllocator::instance().reused(); }
uint64_t BlockCache::fresh() const { return CachingAllocator::instance().fresh(); }

}  // namespace tb
