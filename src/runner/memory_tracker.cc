#include "runner/memory_tracker.h"

#include <c10/core/CPUAllocator.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

// The operator an allocation happens in: a counter bumped at each top-level operator
// (function or autograd node) that starts on the tracking thread.
std::atomic<int64_t> g_op_counter{0};
thread_local int t_depth = 0;
thread_local int64_t t_op = 0;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction&) {
  if (t_depth++ == 0) t_op = ++g_op_counter;
  return nullptr;
}
void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  if (--t_depth <= 0) t_depth = 0, t_op = 0;
}

// The wrapper around LibTorch's CPU allocator. One for the process, never destroyed:
// memory it handed out must come back through it even after the tracker is gone.
class CountingAllocator final : public c10::Allocator {
 public:
  static CountingAllocator& instance() {
    static auto* a = new CountingAllocator();
    return *a;
  }

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = base_->allocate(n);
    void* p = inner.get();
    if (!p) return inner;
    const c10::Device device = inner.device();
    auto& self = const_cast<CountingAllocator&>(*this);
    std::lock_guard<std::mutex> lock(self.mu_);
    Live l{std::move(inner), n, ++self.next_id_, self.session_, current_phase(), t_op};
    if (self.session_ > 0) {
      self.live_bytes_ += int64_t(n);
      self.peak_bytes_ = std::max(self.peak_bytes_, self.live_bytes_);
      if (self.recording_) {
        AllocationRecord r;
        r.id = l.id, r.ptr = p, r.bytes = n, r.phase = l.phase, r.op = l.op;
        r.alloc_seq = int64_t(self.events_.size());
        self.index_[r.id] = self.records_.size();
        self.records_.push_back(r);
        self.events_.push_back({l.id, true, int64_t(n), l.phase, self.now_us()});
      }
    }
    self.live_.emplace(p, std::move(l));
    // The context is the pointer itself, so raw_allocate()/raw_deleter() work too.
    return {p, p, &CountingAllocator::release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::release; }

  static void release(void* p) { instance().free(p); }

  void free(void* p) {
    c10::DataPtr inner;  // freed after the lock is released
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;  // cannot happen: only our pointers come here
      Live& l = it->second;
      if (l.session == session_ && session_ > 0) {
        live_bytes_ -= int64_t(l.bytes);
        if (recording_) {
          const Phase ph = current_phase();
          auto idx = index_.find(l.id);
          if (idx != index_.end()) {
            AllocationRecord& r = records_[idx->second];
            r.freed = true, r.free_phase = ph, r.free_op = t_op;
            r.free_seq = int64_t(events_.size());
          }
          events_.push_back({l.id, false, -int64_t(l.bytes), ph, now_us()});
        }
      }
      inner = std::move(l.inner);
      live_.erase(it);
    }
  }

  void install() {
    std::lock_guard<std::mutex> lock(mu_);
    if (session_ > 0) throw std::logic_error("one MemoryTracker at a time");
    // base_ only once the checks pass: a base_ that is this allocator would call itself.
    c10::Allocator* base = c10::GetCPUAllocator();
    if (base == this) throw std::logic_error("the counting allocator is already installed");
    c10::SetCPUAllocator(this, /*priority=*/0);
    if (c10::GetCPUAllocator() != this)
      throw std::runtime_error("could not install the counting CPU allocator");
    base_ = base;
    session_ = ++sessions_;
    live_bytes_ = peak_bytes_ = 0;
  }

  void uninstall() {
    std::lock_guard<std::mutex> lock(mu_);
    // Another wrapper installed over this one (the profiler's BlockCache) stays in place.
    if (c10::GetCPUAllocator() == this) c10::SetCPUAllocator(base_, /*priority=*/0);
    session_ = 0;
    recording_ = false;
  }

  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    records_.clear(), events_.clear(), index_.clear();
    for (const auto& [p, l] : live_) {
      if (l.session != session_) continue;
      AllocationRecord r;
      r.id = l.id, r.ptr = p, r.bytes = l.bytes, r.phase = l.phase, r.op = l.op;
      r.alloc_seq = -1;
      index_[r.id] = records_.size();
      records_.push_back(r);
    }
    peak_bytes_ = live_bytes_;
    start_ = Clock::now();
    recording_ = true;
  }

  void stop(std::vector<AllocationRecord>& records, std::vector<AllocationEvent>& events) {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    records = std::move(records_);
    events = std::move(events_);
    records_.clear(), events_.clear(), index_.clear();
  }

  uint64_t id_of(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(const_cast<void*>(p));
    return it != live_.end() && it->second.session == session_ ? it->second.id : 0;
  }
  int64_t live_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_bytes_;
  }
  int64_t peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_bytes_;
  }

 private:
  struct Live {
    c10::DataPtr inner;
    size_t bytes;
    uint64_t id, session;
    Phase phase;
    int64_t op;
  };
  double now_us() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - start_).count();
  }

  mutable std::mutex mu_;
  c10::Allocator* base_ = nullptr;
  std::unordered_map<void*, Live> live_;
  uint64_t next_id_ = 0, session_ = 0, sessions_ = 0;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
  bool recording_ = false;
  Clock::time_point start_;
  std::vector<AllocationRecord> records_;
  std::vector<AllocationEvent> events_;
  std::unordered_map<uint64_t, size_t> index_;
};

}  // namespace

MemoryTracker::MemoryTracker() { CountingAllocator::instance().install(); }

MemoryTracker::~MemoryTracker() {
  if (recording_) stop();
  CountingAllocator::instance().uninstall();
}

void MemoryTracker::start() {
  t_depth = 0, t_op = 0;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_op_start, &on_op_end)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  CountingAllocator::instance().start();
  recording_ = true;
}

void MemoryTracker::stop() {
  CountingAllocator::instance().stop(records_, events_);
  at::removeCallback(handle_);
  recording_ = false;
}

uint64_t MemoryTracker::id_of(const void* ptr) const {
  return CountingAllocator::instance().id_of(ptr);
}
int64_t MemoryTracker::live_bytes() const { return CountingAllocator::instance().live_bytes(); }
int64_t MemoryTracker::peak_bytes() const { return CountingAllocator::instance().peak_bytes(); }

}  // namespace tb
