#include "jobs/cluster.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "store/store.h"

namespace tb {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int to_int(const char* name, const char* v) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0 || x > 1000000)
    throw UsageError(fmt::format("{}={}: not a rank or size", name, v));
  return int(x);
}

}  // namespace

std::optional<std::pair<int, int>> shard_from_launcher(std::string* source) {
  static const std::pair<const char*, const char*> kVars[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"PMIX_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
  };
  for (const auto& [rank_var, size_var] : kVars) {
    const char* rank = env(rank_var);
    const char* size = env(size_var);
    if (!rank || !size) continue;
    const int r = to_int(rank_var, rank), n = to_int(size_var, size);
    if (n < 1 || r >= n)
      throw UsageError(
          fmt::format("{}={} with {}={}: rank out of range", rank_var, rank, size_var, size));
    if (source) *source = fmt::format("{}={}, {}={}", rank_var, rank, size_var, size);
    return std::make_pair(r + 1, n);
  }
  return std::nullopt;
}

std::string shard_store_path(const std::string& store, int i, int n) {
  const auto slash = store.find_last_of('/');
  const auto dot = store.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_ext ? store.substr(0, dot) : store;
  return fmt::format("{}.shard-{}-of-{}{}", stem, i, n, has_ext ? store.substr(dot) : "");
}

void mark_shard_done(const std::string& shard_store, const std::string& note) {
  const std::string tmp = shard_store + ".done.tmp";
  {
    std::ofstream out(tmp);
    out << note << "\n";
  }
  std::rename(tmp.c_str(), (shard_store + ".done").c_str());  // whole or absent, on NFS too
}

int64_t merge_shards(const std::string& store, int n, double timeout_s, std::ostream& log) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_note = start;
  for (;;) {
    std::vector<int> missing;
    for (int i = 1; i <= n; ++i)
      if (access((shard_store_path(store, i, n) + ".done").c_str(), F_OK) != 0)
        missing.push_back(i);
    if (missing.empty()) break;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    std::string list;
    for (int i : missing) list += (list.empty() ? "" : ", ") + std::to_string(i);
    if (timeout_s > 0 && waited > timeout_s)
      throw std::runtime_error(fmt::format(
          "shards {} of {} not done after {:.0f} s: their stores are not merged", list, n, waited));
    if (Clock::now() - last_note > std::chrono::seconds(60)) {
      log << fmt::format("waiting for shards {} of {} to finish before merging\n", list, n);
      last_note = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::vector<std::unique_ptr<Store>> inputs;
  for (int i = 1; i <= n; ++i)
    inputs.push_back(Store::open_read_only(shard_store_path(store, i, n)));
  auto out = Store::open(store);
  int64_t added = 0;
  for (auto& in : inputs) added += out->merge_from(*in).added;
  log << fmt::format("merged {} shard stores into {} ({} new runs, {} in all)\n", n, store, added,
                     out->count_runs());
  return added;
}

void finish_shard(const std::string& store, int i, int n, const SweepSummary& summary,
                  double merge_timeout_s, std::ostream& log) {
  mark_shard_done(shard_store_path(store, i, n), summary.interrupted ? "interrupted"
                                                 : summary.harness_error.empty()
                                                     ? "done"
                                                     : summary.harness_error);
  if (i == 1) merge_shards(store, n, merge_timeout_s, log);
}

}  // namespace tb
