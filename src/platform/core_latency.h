// The round trip of one cache line between two of this process's CPUs: how long a thread waits
// for another to see its write and answer. OpenMP's forks, joins and barriers pay it dozens of
// times per training step, so where a virtual machine's vCPUs land on the host (two cores
// sharing a cache, or two chiplets apart) moves multi-threaded step times with it.
#pragma once
#include <optional>

namespace tb {

struct CoreRoundTrip {
  int cpu_a = -1, cpu_b = -1;  // the two CPUs, the first two this process may run on
  double ns = 0;               // one round trip, the median of the batches
};

// Two threads pinned to the first two CPUs of the calling thread's affinity pass a counter
// back and forth (a few milliseconds). None with fewer than two CPUs, or where the two threads
// did not both run within a quarter of a second (CPUs busy with other work).
std::optional<CoreRoundTrip> core_round_trip();

}  // namespace tb
