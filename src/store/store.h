#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tb {
namespace sql {
class Database;
}

inline constexpr int kStoreSchemaVersion = 1;

// The message for a store write that the environment refused (SQLite result `code`: full
// disk, read-only file or filesystem, I/O error), naming the store, what SQLite said and how
// many results it keeps (`kept` < 0: could not be counted); nullopt for any other failure,
// which stays an internal error.
std::optional<std::string> storage_failure_message(const std::string& path, int code,
                                                   const std::string& sqlite_message, int64_t kept);

// The results store: one SQLite file (WAL mode), each result committed in its own
// transaction. Tables: meta (schema version), platform, stack (the software that ran),
// run (one row per config per platform per stack, every hyperparameter its own column,
// the metrics of `trainbench run`, raw step times, the full result JSON), and, added
// without a version change, profile_run/profile (per-operator profiles), memory
// (measured memory breakdowns) and emulation_variant/emulation_seed (emulation results). See
// docs/sweeps.md and docs/profiling.md.
class Store {
 public:
  // Opens or creates a store. A file that is not a trainbench store, or is corrupt, is
  // refused with a UsageError and never modified.
  static std::unique_ptr<Store> open(const std::string& path, bool create = true);
  // Opens an existing store for reading only (export, merge inputs): nothing is written,
  // not even a migration, and a read-only file is fine.
  static std::unique_ptr<Store> open_read_only(const std::string& path);
  ~Store();

  // Ids of the platform / stack rows, inserted on first use. `identity` is what makes two
  // of them the same; `detail` is stored beside it.
  int64_t platform_id(const nlohmann::json& identity, const std::string& name,
                      const nlohmann::json& detail);
  int64_t stack_id(const nlohmann::json& identity);

  // The recorded status of a config on a platform and stack, empty if none.
  std::string run_status(const std::string& config, int64_t platform, int64_t stack);
  // The stored result object with its step times, or null when there is none.
  nlohmann::json run_result(const std::string& config, int64_t platform, int64_t stack);
  // Records one result (the object `trainbench run --json` prints per config). With
  // `replace`, an earlier row of the same config/platform/stack is replaced.
  void add_run(const nlohmann::json& result, int64_t platform, int64_t stack,
               const std::string& sweep, bool replace);

  // Every run joined with its platform and stack, flat: what export and analysis read.
  std::vector<nlohmann::json> runs();
  // Every platform row: id, name, identity and detail (a platform description, or null).
  std::vector<nlohmann::json> platforms();
  int64_t count_runs();
  // Copies the other store's platforms, stacks and runs, and its profiles and memory
  // breakdowns, skipping those already present. A run (config, platform, stack) is kept once:
  // a success over a failure, and of two of the same outcome the one that finished later (a
  // re-measurement; a tie of whole seconds goes to the larger result text), whichever store it
  // came from, so the result does not depend on the order of the stores. Profiles, memory
  // breakdowns and emulations are kept first come.
  struct MergeCounts {
    int64_t added = 0;     // runs new here
    int64_t replaced = 0;  // runs here replaced by the other store's
    int64_t kept = 0;      // the other store's runs dropped for one here
  };
  MergeCounts merge_from(Store& other);
  // Per-operator profiles (`trainbench profile --store`, `sweep --profile`): one summary row
  // in profile_run and one row per operator in profile, replacing an earlier profile of the
  // same config/platform/stack. `profile` is the object to_json(Profile) makes.
  void add_profile(const nlohmann::json& profile, int64_t platform, int64_t stack);
  // Profiles in the shape add_profile took them (all, or one config's), with their
  // platform_id and stack_id.
  std::vector<nlohmann::json> profiles(const std::string& config = "");
  // Measured memory breakdowns (`trainbench memory --store`): the object
  // to_json(MemoryBreakdown) makes, one row per config/platform/stack; read back with
  // their platform_id and stack_id.
  void add_memory(const nlohmann::json& breakdown, int64_t platform, int64_t stack);
  std::vector<nlohmann::json> memory_breakdowns(const std::string& config = "");
  // Emulation results (`trainbench emulate --store`): one emulation_variant row per variant
  // descriptor (`variant`: model, formats per point, rounding, unit, activation, loss
  // scaling, target, ...) and one emulation_seed row per seed (iterations to the target or
  // null, best accuracy, the accuracy curve). Seeds already stored for the same variant and
  // platform are replaced. Read back as {variant, platform_id, stack_id, seeds: [...]}.
  void add_emulation(const nlohmann::json& variant, const std::vector<nlohmann::json>& seeds,
                     int64_t platform, int64_t stack);
  std::vector<nlohmann::json> emulations();
  std::string integrity_check();  // "ok" or SQLite's report
  const std::string& path() const { return path_; }

 private:
  Store(std::string path, std::unique_ptr<sql::Database> db);
  void migrate();
  void ensure_param_columns();
  bool has_table(const std::string& name);
  bool has_column(const std::string& table, const std::string& column);
  void merge_extras_from(Store& other);
  int64_t id_of(const char* table, const std::string& identity);  // of a platform/stack row
  std::string path_;
  std::unique_ptr<sql::Database> db_;
  std::set<std::string> param_columns_;
};

}  // namespace tb
