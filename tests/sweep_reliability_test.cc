// Sweeps as a long job meets the world: killed at random moments, configs that crash,
// hang or eat memory, Ctrl-C, bad files, foreign stores.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "store/sqlite.h"
#include "store/store.h"
#include "support/files.h"

namespace {

using ::tb::testing::read_text;

// A fresh path: a file left by an earlier run whose process had the same pid is removed
// (a stale merged.db once made a merge look like it duplicated runs).
std::string tmp(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/tb-" + std::to_string(getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(TB_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(TB_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run(const std::vector<std::string>& args, const std::string& log) {
  return wait_exit(spawn(args, log));
}

// config -> how many rows
std::map<std::string, int> rows(const std::string& db) {
  tb::sql::Database d(db, SQLITE_OPEN_READONLY);
  auto st = d.prepare("SELECT config, COUNT(*) FROM run GROUP BY config");
  std::map<std::string, int> out;
  while (st.step()) out[st.text(0)] = int(st.integer(1));
  return out;
}

const char* kSmall = R"(
name = "small"
budget = 0.2
repetitions = 1
target_ci = 0.05
[[grid]]
family = "fc"
layers = [1, 2]
nodes = [16, 32, 64]
input = 32
output = 4
batch = [4, 8]
)";

TEST(SweepReliability, KillNineAtRandomMomentsThenResume) {
  const std::string file = tmp("small.toml"), db = tmp("kill.db"), log = tmp("kill.log");
  write(file, kSmall);
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> ms(300, 2500);
  int kills = 0;
  for (int i = 0; i < 12; ++i) {
    const pid_t pid = spawn({"sweep", file, "--store", db}, log);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms(rng)));
    if (kill(pid, SIGKILL) == 0) ++kills;
    wait_exit(pid);
  }
  EXPECT_GE(kills, 10);
  ASSERT_EQ(run({"sweep", file, "--store", db}, log), 0) << read_text(log);
  const auto r = rows(db);
  EXPECT_EQ(r.size(), 12u);                                     // every config, none lost
  for (const auto& [config, n] : r) EXPECT_EQ(n, 1) << config;  // none duplicated
  auto store = tb::Store::open(db, false);
  EXPECT_EQ(store->integrity_check(), "ok");
  for (const auto& row : store->runs()) {  // nothing unfinished recorded as finished
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_GT(row["step_mean_s"].get<double>(), 0);
  }
}

TEST(SweepReliability, CrashAbortOomAndHangAreRecordedAndTheSweepFinishes) {
  const std::string file = tmp("faults.toml"), db = tmp("faults.db"), log = tmp("faults.log");
  write(file, R"(
budget = 0.3
timeout = 12
repetitions = 1
[[grid]]
family = "fault"
mode = ["segfault", "abort", "alloc", "hang", "ok"]
)");
  ASSERT_EQ(run({"sweep", file, "--store", db, "--memory-limit", "1.5"}, log), 0) << read_text(log);
  auto store = tb::Store::open(db, false);
  std::map<std::string, std::string> status;
  for (const auto& row : store->runs()) status[row["p_mode"]] = row["status"];
  EXPECT_EQ(status["segfault"], "crashed");
  EXPECT_EQ(status["abort"], "crashed");
  EXPECT_EQ(status["alloc"], "oom");
  EXPECT_EQ(status["hang"], "timeout");
  EXPECT_EQ(status["ok"], "ok");
  for (const auto& row : store->runs())
    if (row["status"] != "ok") EXPECT_FALSE(row["error"].get<std::string>().empty()) << row.dump();
}

TEST(SweepReliability, CtrlCStopsCleanlyAndKeepsWhatFinished) {
  const std::string file = tmp("int.toml"), db = tmp("int.db"), log = tmp("int.log");
  write(file, kSmall);
  const pid_t pid = spawn({"sweep", file, "--store", db}, log);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130) << read_text(log);
  EXPECT_NE(read_text(log).find("interrupted"), std::string::npos);
  auto store = tb::Store::open(db, false);
  EXPECT_EQ(store->integrity_check(), "ok");
  EXPECT_LT(store->count_runs(), 12);
  for (const auto& row : store->runs()) EXPECT_EQ(row["status"], "ok");
}

TEST(SweepReliability, MalformedSweepFileWritesNothing) {
  const std::string file = tmp("bad.toml"), db = tmp("never.db"), log = tmp("bad.log");
  write(file, "[[grid]]\nfamily = \"fc\"\nnodes = \"64..32 x2\"\n");
  EXPECT_EQ(run({"sweep", file, "--store", db}, log), 2);
  const std::string out = read_text(log);
  EXPECT_NE(out.find(file + ":3: key 'nodes': empty range"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_FALSE(std::ifstream(db).good());
}

TEST(SweepReliability, ForeignOrCorruptStoresAreRefusedAndUntouched) {
  const std::string file = tmp("one.toml"), log = tmp("foreign.log");
  write(file,
        "budget = 0.2\nrepetitions = 1\n[[grid]]\nfamily = \"fc\"\nnodes = 8\ninput = 8\nbatch = "
        "2\n");
  // Not a database at all.
  const std::string junk = tmp("junk.db");
  write(junk, std::string(5000, 'x'));
  // A database, but not trainbench's.
  const std::string other = tmp("other.db");
  {
    tb::sql::Database d(other, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    d.exec("CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('x');");
  }
  // A trainbench store with damaged pages.
  const std::string broken = tmp("broken.db");
  ASSERT_EQ(run({"sweep", file, "--store", broken}, log), 0) << read_text(log);
  {
    std::string bytes = read_text(broken);
    ASSERT_GT(bytes.size(), 8192u);
    // Break the b-tree page headers (page type byte and cell counts) of every page but
    // the first: the kind of damage SQLite's own checks detect.
    for (size_t page = 4096; page + 8 < bytes.size(); page += 4096)
      for (size_t i = 0; i < 8; ++i) bytes[page + i] = char(0xA5);
    std::ofstream(broken, std::ios::binary | std::ios::trunc) << bytes;
  }
  for (const std::string& db : {junk, other, broken}) {
    const std::string before = read_text(db);
    std::remove(log.c_str());
    EXPECT_EQ(run({"sweep", file, "--store", db}, log), 2) << db << read_text(log);
    const std::string out = read_text(log);
    EXPECT_NE(out.find("store '" + db + "'"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_TRUE(read_text(db) == before) << db << " was modified";
  }
}

TEST(SweepReliability, ConcurrentWritersToOneStoreWait) {
  const std::string file = tmp("conc.toml"), db = tmp("conc.db"), log = tmp("conc.log");
  write(file, kSmall);
  std::vector<pid_t> pids;
  for (int i = 1; i <= 3; ++i)
    pids.push_back(spawn({"sweep", file, "--store", db, "--shard", std::to_string(i) + "/3"}, log));
  for (pid_t p : pids) EXPECT_EQ(wait_exit(p), 0) << read_text(log);
  const auto r = rows(db);
  EXPECT_EQ(r.size(), 12u);
  for (const auto& [config, n] : r) EXPECT_EQ(n, 1) << config;
  // Hyperparameter columns hold numbers as numbers.
  tb::sql::Database d(db, SQLITE_OPEN_READONLY);
  auto st =
      d.prepare("SELECT COUNT(*) FROM run WHERE p_nodes >= 32 AND typeof(p_nodes) = 'integer'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.integer(0), 8);
}

TEST(SweepReliability, ShardsMergeToTheUnsplitSweep) {
  const std::string file = tmp("shard.toml"), log = tmp("shard.log");
  write(file, kSmall);
  const std::string whole = tmp("whole.db"), merged = tmp("merged.db");
  // The whole sweep and its three shards at once, each into its own store (what is checked is
  // the merge, not the measurements).
  std::vector<pid_t> pids{spawn({"sweep", file, "--store", whole}, log)};
  std::vector<std::string> parts;
  for (int i = 1; i <= 3; ++i) {
    parts.push_back(tmp("part" + std::to_string(i) + ".db"));
    pids.push_back(
        spawn({"sweep", file, "--store", parts.back(), "--shard", std::to_string(i) + "/3"}, log));
  }
  for (pid_t p : pids) ASSERT_EQ(wait_exit(p), 0) << read_text(log);
  ASSERT_EQ(run({"merge", parts[0], parts[1], parts[2], "-o", merged}, log), 0) << read_text(log);
  ASSERT_EQ(run({"merge", parts[0], parts[1], "-o", merged}, log), 0);  // again: no duplicates
  const auto a = rows(whole), b = rows(merged);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [config, n] : b) {
    EXPECT_EQ(n, 1) << config;
    EXPECT_TRUE(a.count(config)) << config;
  }
  const std::string before = read_text(merged);
  const std::string csv_path = tmp("runs.csv");
  EXPECT_EQ(run({"export", merged, "--format", "csv", "-o", csv_path}, log), 0);
  EXPECT_TRUE(read_text(merged) == before) << "export modified its input";
  const std::string csv = read_text(csv_path);
  EXPECT_NE(csv.substr(0, csv.find('\n')).find("p_nodes"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 13);  // header + 12 runs
}

}  // namespace

namespace {

// A small tmpfs of our own: a real full disk and a real read-only filesystem (root ignores
// file modes, so chmod cannot make one). Needs CAP_SYS_ADMIN; elsewhere the test is skipped.
struct SmallFilesystem {
  std::string dir;
  bool mounted = false;
  explicit SmallFilesystem(const std::string& path, const char* size) : dir(path) {
    std::filesystem::create_directories(dir);
    mounted = mount("tmpfs", dir.c_str(), "tmpfs", 0, size) == 0;
  }
  bool remount_read_only() {
    return mount("tmpfs", dir.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }
  ~SmallFilesystem() {
    if (mounted) umount2(dir.c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir);
  }
};

// Enough small configs that their results overflow a few hundred KiB.
const char* kMany = R"(
budget = 0.05
repetitions = 1
[[grid]]
family = "fc"
layers = [1, 2, 3, 4]
nodes = [8, 16, 32, 64, 128, 256, 512, 1024]
input = 8
batch = 2
)";

int64_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

}  // namespace

TEST(StoreFailures, EachEnvironmentFailureSaysWhatIsKept) {
  const auto full = tb::storage_failure_message("s.db", SQLITE_FULL, "database or disk is full", 7);
  ASSERT_TRUE(full);
  EXPECT_NE(full->find("store 's.db': the disk is full"), std::string::npos) << *full;
  EXPECT_NE(full->find("keeps 7 stored results"), std::string::npos) << *full;
  EXPECT_NE(full->find("run the same command again"), std::string::npos) << *full;
  const auto ro = tb::storage_failure_message("s.db", SQLITE_READONLY, "attempt to write", 1);
  ASSERT_TRUE(ro);
  EXPECT_NE(ro->find("read-only"), std::string::npos) << *ro;
  EXPECT_NE(ro->find("keeps 1 stored result;"), std::string::npos) << *ro;
  const auto io = tb::storage_failure_message("s.db", SQLITE_IOERR, "disk I/O error", -1);
  ASSERT_TRUE(io);
  EXPECT_NE(io->find("keeps its stored results"), std::string::npos) << *io;
  // A constraint or a syntax error is trainbench's own bug: not dressed up as the disk's.
  EXPECT_FALSE(tb::storage_failure_message("s.db", SQLITE_CONSTRAINT, "UNIQUE", 3));
  EXPECT_FALSE(tb::storage_failure_message("s.db", SQLITE_ERROR, "no such column", 3));
}

TEST(StoreFailures, AStoreInAMissingDirectoryIsRefusedBeforeAnythingRuns) {
  const std::string file = tmp("missing.toml"), log = tmp("missing.log");
  const std::string db = tmp("no-such-dir") + "/s.db";
  write(file, kSmall);
  EXPECT_EQ(run({"sweep", file, "--store", db}, log), 2);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("directory '" + tmp("no-such-dir") + "' does not exist"), std::string::npos)
      << out;
  EXPECT_EQ(lines(out), 1) << out;
  EXPECT_EQ(out.find("ok "), std::string::npos) << "a config ran: " << out;
}

TEST(StoreFailures, AFullDiskStopsTheSweepWithTheStoreIntactAndItResumes) {
  SmallFilesystem fs(tmp("fullfs"), "size=256k");
  if (!fs.mounted) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  const std::string file = tmp("many.toml"), log = tmp("full.log"), db = fs.dir + "/s.db";
  write(file, kMany);
  EXPECT_EQ(run({"sweep", file, "--store", db}, log), 3);
  const std::string out = read_text(log);
  const auto at = out.find("trainbench: store '" + db + "': the disk is full");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find("internal error"), std::string::npos) << out;
  EXPECT_EQ(lines(out.substr(at)), 1) << out;
  int64_t kept = 0;
  {
    auto store = tb::Store::open_read_only(db);
    EXPECT_EQ(store->integrity_check(), "ok");
    kept = store->count_runs();
    for (const auto& row : store->runs()) EXPECT_EQ(row["status"], "ok") << row.dump();
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 32);
  EXPECT_NE(out.find("keeps " + std::to_string(kept) + " stored result"), std::string::npos) << out;
  // Space freed (the store moved to a roomy disk): the same command finishes the rest.
  const std::string roomy = tmp("roomy.db");
  for (const char* suffix : {"", "-wal", "-shm"})
    if (std::filesystem::exists(db + suffix))
      std::filesystem::copy_file(db + suffix, roomy + suffix);
  std::remove(log.c_str());
  EXPECT_EQ(run({"sweep", file, "--store", roomy}, log), 0) << read_text(log);
  EXPECT_EQ(tb::Store::open_read_only(roomy)->count_runs(), 32);
  EXPECT_NE(read_text(log).find(std::to_string(kept) + " already in the store"), std::string::npos)
      << read_text(log);
}

TEST(StoreFailures, AReadOnlyFilesystemIsNamedAndItsStoresStillRead) {
  SmallFilesystem fs(tmp("rofs"), "size=4m");
  if (!fs.mounted) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  const std::string file = tmp("ro.toml"), log = tmp("ro.log"), db = fs.dir + "/s.db";
  write(file, kSmall);
  ASSERT_EQ(run({"sweep", file, "--store", db}, log), 0) << read_text(log);
  ASSERT_TRUE(fs.remount_read_only());
  for (const std::string& target : {db, fs.dir + "/new.db"}) {
    std::remove(log.c_str());
    EXPECT_EQ(run({"sweep", file, "--store", target}, log), 2);
    const std::string out = read_text(log);
    EXPECT_NE(out.find("store '" + target + "'"), std::string::npos) << out;
    EXPECT_NE(out.find("Read-only file system"), std::string::npos) << out;
    EXPECT_EQ(lines(out), 1) << out;
  }
  // The WAL store on read-only media opens for reading (immutable) and exports.
  std::remove(log.c_str());
  EXPECT_EQ(run({"export", db, "--format", "csv"}, log), 0) << read_text(log);
  EXPECT_GT(lines(read_text(log)), 1) << read_text(log);
}
