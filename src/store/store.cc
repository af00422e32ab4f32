#include "store/store.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/errors.h"
#include "base/files.h"
#include "platform/host.h"
#include "record/metrics.h"
#include "spec/config.h"
#include "spec/family.h"
#include "store/sqlite.h"

namespace tb {
namespace {

using nlohmann::json;

bool on_network_filesystem(const std::string& path) {
  const std::string dir =
      path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/') + 1);
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x6969:      // NFS
    case 0xFF534D42:  // CIFS
    case 0xFE534D42:  // SMB2
    case 0x65735546:  // FUSE (sshfs, ...)
    case 0x47504653:  // GPFS
    case 0x0BD00BD0:  // Lustre
      return true;
    default:
      return false;
  }
}

// A trainbench store that SQLite finds intact, or a UsageError naming the path.
void check_is_store(sql::Database& db, const std::string& path) {
  // An SQLite file without trainbench's meta table (an empty file is one) is not a store: said
  // so, as for a meta table of another format, not as SQLite's "no such table" with its query.
  bool has_meta = false;
  {
    auto t = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'");
    has_meta = t.step();
  }
  if (!has_meta) throw UsageError("store '" + path + "': not a trainbench results store");
  auto st = db.prepare("SELECT value FROM meta WHERE key = 'format'");
  if (!st.step() || st.text(0) != "trainbench-results")
    throw UsageError("store '" + path + "': not a trainbench results store");
  auto check = db.prepare("PRAGMA quick_check");
  if (!check.step() || check.text(0) != "ok")
    throw UsageError("store '" + path + "': corrupt (" + check.text(0) + "), refusing to use it");
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS platform (
  id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE, name TEXT NOT NULL, detail TEXT);
CREATE TABLE IF NOT EXISTS stack (
  id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE, trainbench_version TEXT,
  git_revision TEXT, libtorch TEXT, blas TEXT, compiler TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS run (
  id INTEGER PRIMARY KEY,
  config TEXT NOT NULL,
  platform_id INTEGER NOT NULL REFERENCES platform(id),
  stack_id INTEGER NOT NULL REFERENCES stack(id),
  family TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT,
  sweep TEXT,
  started_at TEXT, finished_at TEXT,
  step_times TEXT,
  result TEXT NOT NULL,
  UNIQUE (config, platform_id, stack_id));
CREATE INDEX IF NOT EXISTS run_family ON run(family, status);
CREATE TABLE IF NOT EXISTS profile_run (
  id INTEGER PRIMARY KEY,
  config TEXT NOT NULL,
  platform_id INTEGER NOT NULL REFERENCES platform(id),
  stack_id INTEGER NOT NULL REFERENCES stack(id),
  recorded_at TEXT,
  steps INTEGER, step_us REAL, flops_per_step REAL, model_flops_per_step REAL,
  summary TEXT NOT NULL,
  UNIQUE (config, platform_id, stack_id));
CREATE TABLE IF NOT EXISTS profile (
  config TEXT NOT NULL,
  platform_id INTEGER NOT NULL REFERENCES platform(id),
  stack_id INTEGER NOT NULL REFERENCES stack(id),
  name TEXT NOT NULL, shapes TEXT, phase TEXT, class TEXT,
  calls REAL, total_us REAL, self_us REAL, flops REAL, flops_source TEXT, profiler_flops REAL,
  bytes REAL, part TEXT);
CREATE INDEX IF NOT EXISTS profile_key ON profile(config, platform_id, stack_id);
CREATE TABLE IF NOT EXISTS memory (
  id INTEGER PRIMARY KEY,
  config TEXT NOT NULL,
  platform_id INTEGER NOT NULL REFERENCES platform(id),
  stack_id INTEGER NOT NULL REFERENCES stack(id),
  recorded_at TEXT,
  batch INTEGER, peak_bytes REAL, weights REAL, gradients REAL, optimizer_state REAL,
  feature_maps REAL, workspace REAL, temporaries REAL, inputs REAL, other REAL,
  estimate_total_bytes REAL,
  detail TEXT NOT NULL,
  UNIQUE (config, platform_id, stack_id));
CREATE TABLE IF NOT EXISTS emulation_variant (
  id INTEGER PRIMARY KEY,
  descriptor TEXT NOT NULL,
  platform_id INTEGER NOT NULL REFERENCES platform(id),
  stack_id INTEGER NOT NULL REFERENCES stack(id),
  recorded_at TEXT,
  model TEXT, policy TEXT, cost_config TEXT, target REAL,
  UNIQUE (descriptor, platform_id));
CREATE TABLE IF NOT EXISTS emulation_seed (
  variant_id INTEGER NOT NULL REFERENCES emulation_variant(id),
  seed INTEGER NOT NULL,
  iterations INTEGER, best_accuracy REAL, skipped_steps INTEGER, final_loss_scale REAL,
  seconds REAL, curve TEXT NOT NULL, scaling TEXT, best_loss REAL,
  UNIQUE (variant_id, seed));
)";

const char* kMemoryCategoryColumns[] = {"weights",      "gradients", "optimizer_state",
                                        "feature_maps", "workspace", "temporaries",
                                        "inputs",       "other"};

// The directory a new store's file (and its -wal and -shm files) would be created in.
std::string parent_directory(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Refuses a store that cannot be written before SQLite is asked to, with the reason in the
// user's terms; SQLite would say only "unable to open database file" or fail at the first
// result.
void check_writable(const std::string& path, bool existed) {
  const std::string dir = parent_directory(path);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw UsageError(fmt::format("store '{}': directory '{}' does not exist", path, dir));
  // access() answers for the effective user and for read-only filesystems, root included.
  if (existed && access(path.c_str(), W_OK) != 0)
    throw UsageError(fmt::format(
        "store '{}' cannot be written ({}): commands that record results need to write it; "
        "export, analyze and report read it as it is",
        path, std::strerror(errno)));
  if (access(dir.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("store '{}': directory '{}' cannot be written ({}): {}", path, dir,
                                 std::strerror(errno),
                                 existed ? "the store writes its journal files beside it"
                                         : "the store and its journal files are created there"));
}

// file: URI of a path (RFC 3986 escapes for what a URI would read as a delimiter), opened
// immutable: SQLite takes no locks and needs no -shm file.
std::string immutable_uri(const std::string& path) {
  std::string out = "file:";
  for (const char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#')
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + "?immutable=1";
}

int64_t kept_runs(Store& s) {
  try {
    return s.count_runs();
  } catch (const std::exception&) {
    return -1;
  }
}

// Runs one write of the store; a failure the environment caused becomes a StorageError
// that says what is kept.
template <class F>
auto writing(Store& s, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const sql::Error& e) {
    auto message = storage_failure_message(s.path(), e.code(), e.what(), kept_runs(s));
    if (!message) throw;
    throw StorageError(*message);
  }
}

// A directory where a store's file was meant: SQLite would answer "disk I/O error".
void refuse_directory(const std::string& path) {
  if (is_directory(path)) throw UsageError("store '" + path + "' is a directory, not a store file");
}

}  // namespace

std::optional<std::string> storage_failure_message(const std::string& path, int code,
                                                   const std::string& sqlite_message,
                                                   int64_t kept) {
  const std::string keeps = kept < 0
                                ? std::string("its stored results")
                                : fmt::format("{} stored result{}", kept, kept == 1 ? "" : "s");
  // SQLite rolls the failed transaction back, so what was committed before stays as it was.
  switch (code) {
    case SQLITE_FULL:
      return fmt::format(
          "store '{}': the disk is full (SQLite: {}); the store is intact and keeps {}; free "
          "space, then run the same command again (a sweep resumes after its stored results)",
          path, sqlite_message, keeps);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return fmt::format(
          "store '{}': cannot write to it (SQLite: {}): the file, its directory or the "
          "filesystem is read-only; the store keeps {}; make it writable or choose another store",
          path, sqlite_message, keeps);
    case SQLITE_IOERR:
      return fmt::format(
          "store '{}': the filesystem failed a read or write (SQLite: {}); the store keeps {} "
          "as of its last completed write; check the disk, then run the same command again",
          path, sqlite_message, keeps);
    default:
      return std::nullopt;
  }
}

Store::Store(std::string path, std::unique_ptr<sql::Database> db)
    : path_(std::move(path)), db_(std::move(db)) {}
Store::~Store() = default;

std::unique_ptr<Store> Store::open(const std::string& path, bool create) {
  refuse_directory(path);
  const bool existed = exists(path);
  if (!existed && !create) throw UsageError("store '" + path + "' does not exist");
  check_writable(path, existed);
  if (existed) {
    // Look before touching: read-only checks, so a foreign or damaged file is left as it is.
    try {
      sql::Database ro(path, SQLITE_OPEN_READONLY);
      // A database without any table is one another trainbench is creating right now
      // (concurrent sweeps on one new store): it is joined, not refused.
      auto tables = ro.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name = 'meta'");
      tables.step();
      auto any = ro.prepare("SELECT COUNT(*) FROM sqlite_master");
      any.step();
      if (tables.integer(0) == 0 && any.integer(0) > 0)
        throw UsageError("store '" + path + "': not a trainbench results store");
      if (tables.integer(0) > 0) check_is_store(ro, path);
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      throw UsageError("store '" + path + "': not a trainbench results store (" + e.what() + ")");
    }
  }
  std::unique_ptr<sql::Database> db;
  try {
    db = std::make_unique<sql::Database>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // WAL needs shared memory between the writers, so it is only safe on one host; on a
    // network filesystem the rollback journal with file locks is used instead.
    const char* mode = on_network_filesystem(path)
                           ? "PRAGMA journal_mode=DELETE;"
                           : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
    // Switching the journal mode needs the file to itself and can fail at once with "database
    // is locked" (no busy wait) while another process starting on the same new store holds
    // it for a moment: retry for a few seconds.
    for (int attempt = 0;; ++attempt) {
      try {
        db->exec(mode);
        break;
      } catch (const std::exception& e) {
        if (attempt >= 100 || std::string(e.what()).find("locked") == std::string::npos) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    db->exec("PRAGMA foreign_keys=ON;");
  } catch (const std::exception& e) {
    throw UsageError("store '" + path + "': " + e.what());
  }
  std::unique_ptr<Store> s(new Store(path, std::move(db)));
  writing(*s, [&] { s->migrate(); });
  return s;
}

std::unique_ptr<Store> Store::open_read_only(const std::string& path) {
  refuse_directory(path);
  if (!exists(path)) throw UsageError("store '" + path + "' does not exist");
  std::unique_ptr<sql::Database> db;
  try {
    try {
      db = std::make_unique<sql::Database>(path, SQLITE_OPEN_READONLY);
      check_is_store(*db, path);
    } catch (const sql::Error& e) {
      // A WAL store on read-only media cannot get the -shm file a reader needs; nothing can
      // change it there, so it is read as immutable.
      const std::string dir = parent_directory(path);
      if (e.code() != SQLITE_CANTOPEN || access(dir.c_str(), W_OK) == 0) throw;
      db = std::make_unique<sql::Database>(immutable_uri(path),
                                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      check_is_store(*db, path);
    }
    auto v = db->prepare("SELECT value FROM meta WHERE key = 'schema_version'");
    if (!v.step() || std::stoi(v.text(0)) != kStoreSchemaVersion)
      throw UsageError(
          "store '" + path + "': schema version " + v.text(0) +
          " differs from this trainbench's; open it with `trainbench sweep` to migrate");
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    // SQLite's reason, without the query it failed on (sql::Error appends it).
    const std::string why = e.what();
    throw UsageError("store '" + path + "': cannot read it (" + why.substr(0, why.find(" in: ")) +
                     ")");
  }
  return std::unique_ptr<Store>(new Store(path, std::move(db)));
}

void Store::migrate() {
  sql::Transaction t(*db_);
  db_->exec(kSchema);
  int version = 0;
  {
    auto st = db_->prepare("SELECT value FROM meta WHERE key = 'schema_version'");
    if (st.step()) version = std::stoi(st.text(0));
  }
  if (version > kStoreSchemaVersion)
    throw UsageError(fmt::format("store '{}': schema version {} is newer than this trainbench's {}",
                                 path_, version, kStoreSchemaVersion));
  // Migrations from older schema versions go here, one step per version, in order.
  if (version == 0)
    db_->exec("INSERT OR REPLACE INTO meta VALUES ('format', 'trainbench-results')");
  {  // metric columns are only ever added: a store made before one existed gets it now
    std::set<std::string> existing;
    auto st = db_->prepare("PRAGMA table_info(run)");
    while (st.step()) existing.insert(st.text(1));
    for (const auto& m : metric_table())
      if (m.stored() && !existing.count(m.column)) {
        db_->exec(fmt::format("ALTER TABLE run ADD COLUMN {} {}", m.column, m.sql_type));
        // Filled from the results already stored where their JSON has the value: a column
        // added after the JSON field it reads (or dropped and added again) starts complete.
        // JSON booleans become 1 and 0, as add_run writes them.
        std::string path = "$";
        for (const auto& k : m.path) path += ".\"" + k + "\"";
        const char* types = m.sql_type == "TEXT" ? "'text'" : "'integer', 'real', 'true', 'false'";
        auto fill = db_->prepare(
            fmt::format("UPDATE run SET {} = json_extract(result, ?1) WHERE json_valid(result) AND "
                        "json_type(result, ?1) IN ({})",
                        m.column, types));
        fill.bind(1, path);
        fill.step();
      }
  }
  // The model part of a profiled operator came later than the profile table.
  if (!has_column("profile", "part")) db_->exec("ALTER TABLE profile ADD COLUMN part TEXT");
  // And what each rounding point did (emulation/torch_quant.h) later than emulation seeds.
  if (has_table("emulation_seed") && !has_column("emulation_seed", "scaling"))
    db_->exec("ALTER TABLE emulation_seed ADD COLUMN scaling TEXT");
  // And loss targets (the language task) later than that.
  if (has_table("emulation_seed") && !has_column("emulation_seed", "best_loss"))
    db_->exec("ALTER TABLE emulation_seed ADD COLUMN best_loss REAL");
  db_->exec(fmt::format("INSERT OR REPLACE INTO meta VALUES ('schema_version', '{}')",
                        kStoreSchemaVersion));
  t.commit();
  ensure_param_columns();
}

// Every hyperparameter of every family is a column of its own; a family added later
// adds its columns the first time a store is opened by a trainbench that knows it.
void Store::ensure_param_columns() {
  std::set<std::string> wanted;
  for (const auto* f : family_schemas())
    for (const auto& p : f->params) wanted.insert(p.name);
  sql::Transaction t(*db_);  // read and extend under one lock: other writers may be here too
  std::set<std::string> existing;
  {
    auto st = db_->prepare("PRAGMA table_info(run)");
    while (st.step()) existing.insert(st.text(1));
  }
  for (const auto& name : wanted) {
    const std::string col = "p_" + name;
    if (!existing.count(col))
      db_->exec(fmt::format("ALTER TABLE run ADD COLUMN {}", col));  // integers and words
    param_columns_.insert(name);
  }
  t.commit();
}

int64_t Store::platform_id(const json& identity, const std::string& name, const json& detail) {
  return writing(*this, [&] {
    const std::string id = identity.dump();
    sql::Transaction t(*db_);
    db_->prepare("INSERT OR IGNORE INTO platform (identity, name, detail) VALUES (?, ?, ?)")
        .bind(1, id)
        .bind(2, name)
        .bind(3, detail.dump())
        .run();
    const int64_t out = id_of("platform", id);
    t.commit();
    return out;
  });
}

int64_t Store::id_of(const char* table, const std::string& identity) {
  auto st = db_->prepare(fmt::format("SELECT id FROM {} WHERE identity = ?", table));
  st.bind(1, identity);
  if (!st.step()) throw std::runtime_error(fmt::format("{} row vanished", table));
  return st.integer(0);
}

int64_t Store::stack_id(const json& identity) {
  return writing(*this, [&] {
    const std::string id = identity.dump();
    auto field = [&](const char* k) { return identity.value(k, std::string()); };
    sql::Transaction t(*db_);
    db_->prepare(
           "INSERT OR IGNORE INTO stack (identity, trainbench_version, git_revision, libtorch, "
           "blas, "
           "compiler, detail) VALUES (?, ?, ?, ?, ?, ?, ?)")
        .bind(1, id)
        .bind(2, field("trainbench_version"))
        .bind(3, field("git_revision"))
        .bind(4, field("libtorch"))
        .bind(5, field("blas"))
        .bind(6, field("compiler"))
        .bind(7, identity.dump())
        .run();
    const int64_t out = id_of("stack", id);
    t.commit();
    return out;
  });
}

std::string Store::run_status(const std::string& config, int64_t platform, int64_t stack) {
  auto st =
      db_->prepare("SELECT status FROM run WHERE config = ? AND platform_id = ? AND stack_id = ?");
  st.bind(1, config).bind(2, platform).bind(3, stack);
  return st.step() ? st.text(0) : std::string();
}

json Store::run_result(const std::string& config, int64_t platform, int64_t stack) {
  auto st = db_->prepare(
      "SELECT result, step_times FROM run WHERE config = ? AND platform_id = ? AND stack_id = ?");
  st.bind(1, config).bind(2, platform).bind(3, stack);
  if (!st.step()) return nullptr;
  json r = json::parse(st.text(0));
  if (!st.is_null(1) && !st.text(1).empty()) r["step_times_s"] = json::parse(st.text(1));
  return r;
}

void Store::add_run(const json& r, int64_t platform, int64_t stack, const std::string& sweep,
                    bool replace) {
  writing(*this, [&] {
    const std::string config = r.at("config").get<std::string>();
    const Config c = parse_config(config);
    std::vector<std::string> cols = {"config",      "platform_id", "stack_id", "family",
                                     "status",      "error",       "sweep",    "started_at",
                                     "finished_at", "step_times",  "result"};
    for (const auto& m : metric_table())
      if (m.stored()) cols.push_back(m.column);
    for (const auto& [k, v] : c.values()) cols.push_back("p_" + k);
    std::string names, marks;
    for (const auto& col : cols) {
      names += (names.empty() ? "" : ", ") + col;
      marks += marks.empty() ? "?" : ", ?";
    }
    sql::Transaction t(*db_);
    auto st = db_->prepare(fmt::format("INSERT OR {} INTO run ({}) VALUES ({})",
                                       replace ? "REPLACE" : "IGNORE", names, marks));
    int i = 1;
    st.bind(i++, config);
    st.bind(i++, platform);
    st.bind(i++, stack);
    st.bind(i++, c.family());
    st.bind(i++, r.value("status", std::string("invalid")));
    st.bind(i++, r.value("error", std::string()));
    st.bind(i++, sweep);
    st.bind(i++, r.value("started_at", std::string()));
    st.bind(i++, r.value("finished_at", std::string()));
    st.bind(i++, r.contains("step_times_s") ? r["step_times_s"].dump() : std::string("[]"));
    json stored = r;
    stored.erase("step_times_s");  // kept once, in its own column
    st.bind(i++, stored.dump());
    for (const auto& m : metric_table()) {
      if (!m.stored()) continue;
      const json* v = metric_value(r, m);
      if (!v || v->is_null())
        st.bind_null(i++);
      else if (v->is_boolean())
        st.bind(i++, int64_t(v->get<bool>()));
      else if (v->is_string())
        st.bind(i++, v->get<std::string>());
      else if (m.sql_type == "INTEGER")
        st.bind(i++, v->get<int64_t>());
      else
        st.bind(i++, v->get<double>());
    }
    for (const auto& [k, v] : c.values()) {
      const ParamSpec* p = c.schema().find(k);
      if (p && !p->is_choice() && !p->is_text() && k != "device")
        st.bind(i++, int64_t(std::stoll(v)));  // numbers compare as numbers in SQL
      else
        st.bind(i++, v);
    }
    st.run();
    t.commit();
  });
}

int64_t Store::count_runs() {
  auto st = db_->prepare("SELECT COUNT(*) FROM run");
  st.step();
  return st.integer(0);
}

std::vector<json> Store::runs() {
  std::vector<json> out;
  auto st = db_->prepare(
      "SELECT run.*, platform.name AS platform, stack.trainbench_version, stack.git_revision, "
      "stack.libtorch, stack.blas, stack.compiler, stack.identity AS stack_identity FROM run JOIN "
      "platform ON platform.id = "
      "run.platform_id JOIN stack ON stack.id = run.stack_id ORDER BY run.id");
  while (st.step()) {
    json row;
    for (int c = 0; c < st.columns(); ++c) {
      const std::string name = st.column_name(c);
      if (name == "result") continue;
      if (st.is_null(c)) {
        row[name] = nullptr;
        continue;
      }
      const int type = st.type(c);
      if (type == SQLITE_INTEGER)
        row[name] = st.integer(c);
      else if (type == SQLITE_FLOAT)
        row[name] = st.real(c);
      else
        row[name] = st.text(c);
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<json> Store::platforms() {
  std::vector<json> out;
  auto st = db_->prepare("SELECT id, name, identity, detail FROM platform ORDER BY id");
  while (st.step()) {
    out.push_back(
        {{"id", st.integer(0)},
         {"name", st.text(1)},
         {"identity", json::parse(st.text(2))},
         {"detail", st.is_null(3) || st.text(3).empty() ? json() : json::parse(st.text(3))}});
  }
  return out;
}

Store::MergeCounts Store::merge_from(Store& other) {
  return writing(*this, [&] {
    MergeCounts n;
    auto src = other.db_->prepare(
        "SELECT platform.identity, platform.name, platform.detail, stack.identity, run.sweep, "
        "run.result, run.step_times FROM run JOIN platform ON platform.id = run.platform_id JOIN "
        "stack ON stack.id = run.stack_id ORDER BY run.id");
    while (src.step()) {
      const int64_t p = platform_id(json::parse(src.text(0)), src.text(1),
                                    src.text(2).empty() ? json() : json::parse(src.text(2)));
      const int64_t s = stack_id(json::parse(src.text(3)));
      json r = json::parse(src.text(5));
      const std::string config = r.at("config").get<std::string>();
      const std::string have = run_status(config, p, s);
      if (!have.empty()) {
        // A success over a failure; of two alike, the later finish (ISO 8601 UTC sorts as text).
        const bool ok_here = have == "ok", ok_there = r.value("status", std::string()) == "ok";
        bool theirs = ok_there && !ok_here;
        if (ok_here == ok_there) {
          // Finish times have whole seconds: a tie goes to the larger result text, so the
          // winner still does not depend on the stores' order.
          json mine = run_result(config, p, s);
          mine.erase("step_times_s");
          const std::string a = r.value("finished_at", std::string()),
                            b = mine.value("finished_at", std::string());
          theirs = a != b ? a > b : r.dump() > mine.dump();
        }
        if (!theirs) {
          ++n.kept;
          continue;
        }
        ++n.replaced;
      } else {
        ++n.added;
      }
      r["step_times_s"] = json::parse(src.text(6).empty() ? "[]" : src.text(6));
      add_run(r, p, s, src.text(4), !have.empty());
    }
    merge_extras_from(other);
    return n;
  });
}

// Profiles, memory breakdowns and emulation results come along with the runs; one already
// here is kept.
void Store::merge_extras_from(Store& other) {
  auto ids = [&](int64_t platform, int64_t stack) {
    auto p = other.db_->prepare("SELECT identity, name, detail FROM platform WHERE id = ?");
    p.bind(1, platform);
    auto s = other.db_->prepare("SELECT identity FROM stack WHERE id = ?");
    s.bind(1, stack);
    if (!p.step() || !s.step())
      throw std::runtime_error("profile row without its platform or stack");
    return std::make_pair(platform_id(json::parse(p.text(0)), p.text(1),
                                      p.text(2).empty() ? json() : json::parse(p.text(2))),
                          stack_id(json::parse(s.text(0))));
  };
  auto present = [&](const char* table, const std::string& config, int64_t p, int64_t s) {
    auto st = db_->prepare(fmt::format(
        "SELECT COUNT(*) FROM {} WHERE config = ? AND platform_id = ? AND stack_id = ?", table));
    st.bind(1, config).bind(2, p).bind(3, s);
    return st.step() && st.integer(0) > 0;
  };
  for (json prof : other.profiles()) {
    const auto [p, s] = ids(prof["platform_id"].get<int64_t>(), prof["stack_id"].get<int64_t>());
    if (present("profile_run", prof["config"].get<std::string>(), p, s)) continue;
    prof.erase("platform_id");
    prof.erase("stack_id");
    add_profile(prof, p, s);
  }
  if (other.has_table("memory")) {
    auto src = other.db_->prepare("SELECT platform_id, stack_id, detail FROM memory ORDER BY id");
    while (src.step()) {
      const auto [p, s] = ids(src.integer(0), src.integer(1));
      const json m = json::parse(src.text(2));
      if (!present("memory", m["config"].get<std::string>(), p, s)) add_memory(m, p, s);
    }
  }
  for (const json& e : other.emulations()) {
    const auto [p, s] = ids(e["platform_id"].get<int64_t>(), e["stack_id"].get<int64_t>());
    if (has_table("emulation_variant")) {
      auto st = db_->prepare(
          "SELECT COUNT(*) FROM emulation_variant WHERE descriptor = ? AND platform_id = ?");
      st.bind(1, e["variant"].dump()).bind(2, p);
      if (st.step() && st.integer(0) > 0) continue;
    }
    add_emulation(e["variant"], e["seeds"].get<std::vector<json>>(), p, s);
  }
}

void Store::add_profile(const json& p, int64_t platform, int64_t stack) {
  writing(*this, [&] {
    const std::string config = p.at("config").get<std::string>();
    json summary = p;
    summary.erase("ops");  // one row each, in the profile table
    sql::Transaction t(*db_);
    for (const char* table : {"profile_run", "profile"})
      db_
          ->prepare(fmt::format(
              "DELETE FROM {} WHERE config = ? AND platform_id = ? AND stack_id = ?", table))
          .bind(1, config)
          .bind(2, platform)
          .bind(3, stack)
          .run();
    db_->prepare(
           "INSERT INTO profile_run (config, platform_id, stack_id, recorded_at, steps, step_us, "
           "flops_per_step, model_flops_per_step, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, config)
        .bind(2, platform)
        .bind(3, stack)
        .bind(4, utc_now_iso())
        .bind(5, p.value("steps", int64_t(0)))
        .bind(6, p.value("step_us", 0.0))
        .bind(7, p.value("flops_per_step", 0.0))
        .bind(8, p.value("model_flops_per_step", 0.0))
        .bind(9, summary.dump())
        .run();
    auto op = db_->prepare(
        "INSERT INTO profile (config, platform_id, stack_id, name, shapes, phase, class, calls, "
        "total_us, self_us, flops, flops_source, profiler_flops, bytes, part) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const auto& o : p.value("ops", json::array())) {
      op.bind(1, config).bind(2, platform).bind(3, stack);
      op.bind(4, o.value("name", "")).bind(5, o.value("shapes", "")).bind(6, o.value("phase", ""));
      op.bind(7, o.value("class", ""))
          .bind(8, o.value("calls", 0.0))
          .bind(9, o.value("total_us", 0.0));
      op.bind(10, o.value("self_us", 0.0)).bind(11, o.value("flops", 0.0));
      op.bind(12, o.value("flops_source", "")).bind(13, o.value("profiler_flops", 0.0));
      op.bind(14, o.value("bytes", 0.0)).bind(15, o.value("part", ""));
      op.run();
    }
    t.commit();
  });
}

bool Store::has_table(const std::string& name) {
  auto st = db_->prepare("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
  st.bind(1, name);
  return st.step() && st.integer(0) > 0;
}

bool Store::has_column(const std::string& table, const std::string& column) {
  auto st = db_->prepare(fmt::format("PRAGMA table_info({})", table));
  while (st.step())
    if (st.text(1) == column) return true;
  return false;
}

std::vector<json> Store::profiles(const std::string& config) {
  std::vector<json> out;
  if (!has_table("profile_run")) return out;  // a store from before profiles, opened read-only
  const bool with_part = has_column("profile", "part");  // the same, from before parts
  auto st = db_->prepare(
      "SELECT config, platform_id, stack_id, summary FROM profile_run WHERE ? = '' OR config = ? "
      "ORDER BY id");
  st.bind(1, config).bind(2, config);
  while (st.step()) {
    json p = json::parse(st.text(3));
    p["ops"] = json::array();
    auto ops = db_->prepare(fmt::format(
        "SELECT name, shapes, phase, class, calls, total_us, self_us, flops, flops_source, "
        "profiler_flops, bytes, {} FROM profile WHERE config = ? AND platform_id = ? AND "
        "stack_id = ? ORDER BY self_us DESC",
        with_part ? "part" : "''"));
    ops.bind(1, st.text(0)).bind(2, st.integer(1)).bind(3, st.integer(2));
    while (ops.step())
      p["ops"].push_back({{"name", ops.text(0)},
                          {"shapes", ops.text(1)},
                          {"phase", ops.text(2)},
                          {"class", ops.text(3)},
                          {"calls", ops.real(4)},
                          {"total_us", ops.real(5)},
                          {"self_us", ops.real(6)},
                          {"flops", ops.real(7)},
                          {"flops_source", ops.text(8)},
                          {"profiler_flops", ops.real(9)},
                          {"bytes", ops.real(10)},
                          {"part", ops.is_null(11) ? "" : ops.text(11)}});
    p["platform_id"] = st.integer(1);
    p["stack_id"] = st.integer(2);
    out.push_back(std::move(p));
  }
  return out;
}

void Store::add_memory(const json& m, int64_t platform, int64_t stack) {
  writing(*this, [&] {
    const std::string config = m.at("config").get<std::string>();
    sql::Transaction t(*db_);
    auto st = db_->prepare(
        "INSERT OR REPLACE INTO memory (config, platform_id, stack_id, recorded_at, batch, "
        "peak_bytes, weights, gradients, optimizer_state, feature_maps, workspace, temporaries, "
        "inputs, other, estimate_total_bytes, detail) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.bind(1, config).bind(2, platform).bind(3, stack).bind(4, utc_now_iso());
    st.bind(5, m.value("batch", int64_t(0))).bind(6, m.value("peak_bytes", 0.0));
    int i = 7;
    for (const char* c : kMemoryCategoryColumns) {
      const json* v = json_at(m, {"categories", c, "peak_bytes"});
      st.bind(i++, v ? v->get<double>() : 0.0);
    }
    st.bind(i++, m.value("estimate_total_bytes", 0.0));
    st.bind(i++, m.dump());
    st.run();
    t.commit();
  });
}

std::vector<json> Store::memory_breakdowns(const std::string& config) {
  std::vector<json> out;
  if (!has_table("memory")) return out;
  auto st = db_->prepare(
      "SELECT detail, platform_id, stack_id FROM memory WHERE ? = '' OR config = ? ORDER BY id");
  st.bind(1, config).bind(2, config);
  while (st.step()) {
    json m = json::parse(st.text(0));
    m["platform_id"] = st.integer(1);
    m["stack_id"] = st.integer(2);
    out.push_back(std::move(m));
  }
  return out;
}

void Store::add_emulation(const json& variant, const std::vector<json>& seeds, int64_t platform,
                          int64_t stack) {
  writing(*this, [&] {
    sql::Transaction t(*db_);
    const std::string descriptor = variant.dump();
    {
      auto st = db_->prepare(
          "INSERT INTO emulation_variant (descriptor, platform_id, stack_id, recorded_at, model, "
          "policy, cost_config, target) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(descriptor, "
          "platform_id) DO UPDATE SET stack_id = excluded.stack_id, recorded_at = "
          "excluded.recorded_at");
      st.bind(1, descriptor).bind(2, platform).bind(3, stack).bind(4, utc_now_iso());
      st.bind(5, variant.value("model", "")).bind(6, variant.value("policy", ""));
      st.bind(7, variant.value("cost_config", "")).bind(8, variant.value("target", 0.0));
      st.run();
    }
    int64_t id = 0;
    {
      auto st =
          db_->prepare("SELECT id FROM emulation_variant WHERE descriptor = ? AND platform_id = ?");
      st.bind(1, descriptor).bind(2, platform);
      if (!st.step()) throw std::runtime_error("emulation variant not stored");
      id = st.integer(0);
    }
    auto st = db_->prepare(
        "INSERT OR REPLACE INTO emulation_seed (variant_id, seed, iterations, best_accuracy, "
        "skipped_steps, final_loss_scale, seconds, curve, scaling, best_loss) VALUES (?, ?, ?, ?, "
        "?, "
        "?, ?, ?, ?, ?)");
    for (const auto& r : seeds) {
      st.bind(1, id).bind(2, r.at("seed").get<int64_t>());
      const json& it = r.at("iterations_to_target");
      if (it.is_number())
        st.bind(3, it.get<int64_t>());
      else
        st.bind_null(3);
      // A run to a loss target has no accuracy (NULL), and a best loss unless it diverged.
      if (r.contains("best_loss"))
        st.bind_null(4);
      else
        st.bind(4, r.value("best_accuracy", 0.0));
      st.bind(5, r.value("skipped_steps", int64_t(0)));
      st.bind(6, r.value("final_loss_scale", 1.0)).bind(7, r.value("seconds", 0.0));
      st.bind(8, r.at("curve").dump());
      if (r.contains("scaling"))
        st.bind(9, r.at("scaling").dump());
      else
        st.bind_null(9);
      if (r.contains("best_loss") && r.at("best_loss").is_number())
        st.bind(10, r.at("best_loss").get<double>());
      else
        st.bind_null(10);
      st.run();
    }
    t.commit();
  });
}

std::vector<json> Store::emulations() {
  std::vector<json> out;
  if (!has_table("emulation_variant")) return out;  // a store from before emulation results
  auto v = db_->prepare(
      "SELECT id, descriptor, platform_id, stack_id FROM emulation_variant ORDER BY id");
  // A store from before the scaling column, opened read-only, has none.
  const bool with_scaling = has_column("emulation_seed", "scaling");
  const bool with_loss = has_column("emulation_seed", "best_loss");
  auto s = db_->prepare(fmt::format(
      "SELECT seed, iterations, best_accuracy, skipped_steps, final_loss_scale, seconds, curve, "
      "{}, {} FROM emulation_seed WHERE variant_id = ? ORDER BY seed",
      with_scaling ? "scaling" : "NULL", with_loss ? "best_loss" : "NULL"));
  while (v.step()) {
    json e = {{"variant", json::parse(v.text(1))},
              {"platform_id", v.integer(2)},
              {"stack_id", v.integer(3)},
              {"seeds", json::array()}};
    s.bind(1, v.integer(0));
    while (s.step()) {
      e["seeds"].push_back({{"seed", s.integer(0)},
                            {"iterations_to_target", s.is_null(1) ? json() : json(s.integer(1))},
                            {"reached", !s.is_null(1)},
                            {"best_accuracy", s.real(2)},
                            {"skipped_steps", s.integer(3)},
                            {"final_loss_scale", s.real(4)},
                            {"seconds", s.real(5)},
                            {"curve", json::parse(s.text(6))}});
      // What the rounding points did, where the seed recorded it (later than the curve).
      if (!s.is_null(7)) e["seeds"].back()["scaling"] = json::parse(s.text(7));
      // A run to a loss target has a best loss (null: it diverged) instead of an accuracy.
      if (s.is_null(2)) {
        e["seeds"].back().erase("best_accuracy");
        e["seeds"].back()["best_loss"] = s.is_null(8) ? json() : json(s.real(8));
      }
    }
    s.reset();
    out.push_back(std::move(e));
  }
  return out;
}

std::string Store::integrity_check() {
  auto st = db_->prepare("PRAGMA integrity_check");
  std::string out;
  while (st.step()) out += (out.empty() ? "" : "; ") + st.text(0);
  return out;
}

}  // namespace tb
