#pragma once
// Measures, rather than estimates, what a training step allocates: LibTorch's CPU
// allocator is wrapped by one that counts every allocation and free and tags it with the
// training phase (runner/phase.h) and the top-level operator it happened in.
#include <c10/core/Allocator.h>

#include <cstdint>
#include <vector>

#include "model/phase.h"

namespace tb {

// One allocation seen while a MemoryTracker was recording.
struct AllocationRecord {
  uint64_t id = 0;
  const void* ptr = nullptr;
  size_t bytes = 0;
  Phase phase = Phase::kOther;  // when it was allocated
  int64_t op = 0;               // top-level operator it was allocated in (0: none)
  int64_t alloc_seq = 0;        // position in the event log
  // Set when it was freed while recording.
  bool freed = false;
  Phase free_phase = Phase::kOther;
  int64_t free_op = 0;
  int64_t free_seq = 0;
};

// An allocation or a free, in order.
struct AllocationEvent {
  uint64_t id = 0;
  bool alloc = true;
  int64_t bytes = 0;
  Phase phase = Phase::kOther;
  double t_us = 0;  // since recording started
};

// Installs the counting allocator while it lives (one tracker at a time). Allocations
// made before it was created are not seen; those made while it lives are freed correctly
// after it is gone (the wrapper stays behind as a pass-through).
class MemoryTracker {
 public:
  MemoryTracker();
  ~MemoryTracker();
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Starts a new log: from now on every allocation and free is recorded, with the
  // operator it happened in (a RecordFunction callback on this thread).
  void start();
  // Ends the log. Allocations made since the tracker was created and still alive at
  // start() are included in records(), marked with alloc_seq -1.
  void stop();
  const std::vector<AllocationRecord>& records() const { return records_; }
  const std::vector<AllocationEvent>& events() const { return events_; }

  // The id of the live tracked allocation starting at `ptr` (a storage's data), or 0.
  uint64_t id_of(const void* ptr) const;
  // Bytes of this tracker's allocations alive now, and the most alive at once since start().
  int64_t live_bytes() const;
  int64_t peak_bytes() const;

 private:
  std::vector<AllocationRecord> records_;
  std::vector<AllocationEvent> events_;
  uint64_t handle_ = 0;
  bool recording_ = false;
};

}  // namespace tb
