// The machine's own reproducibility floor: a fixed piece of plain C++ work (no LibTorch, no
// BLAS, no OpenMP) timed like a training step, so that its spread between fresh processes is
// what the machine contributes to trainbench's. A step is one chunk of work per thread, and the
// step ends when the slowest thread is done (as an OpenMP parallel region does), so a slow core
// slows the whole step. Two kinds of work: `scalar`, a chain of dependent floating-point
// operations (core speed), and `stream`, a sum over an array four times larger than a last-level
// cache slice (memory bandwidth).
//
//   machine_floor [--threads N] [--seconds S] [--work scalar|stream]
// prints one JSON line: mean, median, min and max step time over S seconds of steps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// A step's worth of work sized to about 0.5 ms on a current core: long enough that the clock
// reads do not matter, short enough that a one-second slow spell covers many steps.
double scalar_work(double seed) {
  double x = seed;
  for (int i = 0; i < 400000; ++i) x = x * 0.999999 + 1e-9;
  return x;
}

double stream_work(const std::vector<double>& a) {
  double s = 0;
  for (double v : a) s += v;
  return s;
}

int usage(const char* bad) {
  std::fprintf(stderr,
               "machine_floor: bad argument '%s'\n"
               "usage: machine_floor [--threads N] [--seconds S] [--work scalar|stream]\n",
               bad);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 1.5;
  std::string work = "scalar";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(argv[i]);
    if (a == "--threads") {
      threads = std::atoi(argv[++i]);
      if (threads < 1 || threads > 256) return usage(argv[i]);
    } else if (a == "--seconds") {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0 && seconds < 3600)) return usage(argv[i]);
    } else if (a == "--work") {
      work = argv[++i];
      if (work != "scalar" && work != "stream") return usage(argv[i]);
    } else {
      return usage(argv[i]);
    }
  }
  // 16 MiB per thread: larger than a core's share of the last-level cache on these machines.
  std::vector<std::vector<double>> arrays(threads, std::vector<double>(2 << 20, 1.0));
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::atomic<long> generation{0};
  std::vector<double> sink(threads, 0);
  // Workers spin between steps, as OpenMP's threads do under GOMP_SPINCOUNT, so that waking
  // them costs no more than it costs LibTorch's pool.
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      long seen = 0;
      while (true) {
        long g;
        while ((g = generation.load(std::memory_order_acquire)) == seen)
          if (stop.load(std::memory_order_relaxed)) return;
        seen = g;
        sink[t] += work == "scalar" ? scalar_work(double(g)) : stream_work(arrays[t]);
        done.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  std::vector<double> steps;
  const auto t_start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t_start).count() < seconds) {
    const auto t0 = Clock::now();
    done.store(0, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_acq_rel);
    sink[0] += work == "scalar" ? scalar_work(double(steps.size())) : stream_work(arrays[0]);
    while (done.load(std::memory_order_acquire) < threads - 1) {
    }
    steps.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  stop = true;
  for (auto& th : pool) th.join();
  // The first steps pay for page faults and frequency ramp-up: drop a tenth, as a warm-up.
  const size_t skip = steps.size() / 10;
  std::vector<double> kept(steps.begin() + long(skip), steps.end());
  double sum = 0;
  for (double s : kept) sum += s;
  std::vector<double> sorted = kept;
  std::sort(sorted.begin(), sorted.end());
  double checksum = 0;
  for (double s : sink) checksum += s;
  std::printf(
      "{\"work\": \"%s\", \"threads\": %d, \"seconds\": %g, \"steps\": %zu, \"mean_s\": %.9g, "
      "\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"checksum\": %g}\n",
      work.c_str(), threads, seconds, kept.size(), sum / double(kept.size()),
      sorted[sorted.size() / 2], sorted.front(), sorted.back(), checksum);
  return 0;
}
