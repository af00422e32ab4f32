#include "platform/core_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

// Each counter on a cache line of its own: the round trip is the two lines' transfers, not a
// line the two threads write at once.
struct alignas(64) Line {
  std::atomic<uint32_t> v{0};
};

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace

std::optional<CoreRoundTrip> core_round_trip() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return std::nullopt;

  // 2,000 round trips a batch: 0.2 ms between cores that share a cache, 1 ms between chiplets
  // of a 2-vCPU EPYC VM; the first batch warms up, the median of the other four is the figure.
  constexpr uint32_t kTrips = 2000, kBatches = 5, kStop = 0xFFFFFFFFu;
  const auto deadline = Clock::now() + std::chrono::milliseconds(250);
  Line ping, pong;
  std::atomic<bool> failed{false};
  // Spinning checks the clock every 4096 polls: a thread whose partner is not running gives up
  // at the deadline instead of spinning on.
  const auto wait_for = [&](const std::atomic<uint32_t>& x, uint32_t want) {
    for (uint32_t polls = 0;; ++polls) {
      const uint32_t seen = x.load(std::memory_order_acquire);
      if (seen == want || seen == kStop) return seen == want;
      if ((polls & 4095u) == 4095u && (failed.load() || Clock::now() > deadline)) {
        failed = true;
        return false;
      }
    }
  };
  std::thread echo([&] {
    if (!pin_to(cpus[1])) failed = true;
    for (uint32_t seq = 1;; ++seq) {
      if (!wait_for(ping.v, seq)) return;
      pong.v.store(seq, std::memory_order_release);
    }
  });
  std::vector<double> batches;
  std::thread lead([&] {
    if (!pin_to(cpus[0])) failed = true;
    uint32_t seq = 0;
    for (uint32_t b = 0; b < kBatches && !failed; ++b) {
      const auto t0 = Clock::now();
      for (uint32_t i = 0; i < kTrips; ++i) {
        ping.v.store(++seq, std::memory_order_release);
        if (!wait_for(pong.v, seq)) return;
      }
      batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                        double(kTrips));
    }
  });
  lead.join();
  ping.v.store(kStop, std::memory_order_release);  // the echo thread's way out, however it ended
  echo.join();
  if (failed || batches.size() < kBatches) return std::nullopt;
  std::vector<double> timed(batches.begin() + 1, batches.end());
  std::sort(timed.begin(), timed.end());
  return CoreRoundTrip{cpus[0], cpus[1], (timed[1] + timed[2]) / 2};
}

}  // namespace tb
