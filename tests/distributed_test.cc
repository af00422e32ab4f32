// Data-parallel runs (runner/distributed.cc, runner/launcher.cc) and sweeps spread over
// shards (runner/cluster.cc), through the trainbench program as a user starts them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/errors.h"
#include "model/workload.h"
#include "runner/runner.h"
#include "spec/config.h"
#include "store/store.h"
#include "support/files.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using ::tb::testing::read_text;

// Small enough that a step is a millisecond or so, big enough to have two buckets.
const std::string kShardedFc = "fc:layers=2,nodes=64,input=32,output=8,batch=16,threads=1";

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/tb_dist_" + std::to_string(getpid()) + "_" + name;
}

struct Timed {
  int status;
  std::string out, err;
  double seconds;
};

Timed sh(const std::string& cmd) {
  const std::string err_file = temp_path("stderr.txt");
  const auto t0 = Clock::now();
  Timed o;
  FILE* p = popen((cmd + " 2>" + err_file).c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  const int raw = pclose(p);
  o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  o.err = read_text(err_file);
  return o;
}

int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// One rank started as torchrun would; its stdout goes to `out`.
pid_t start_rank(int rank, int world, int port, const std::string& args, const std::string& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    const int err = open((out + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, STDERR_FILENO);
    execl("/bin/sh", "sh", "-c", (std::string("exec " TB_BINARY " run ") + args).c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

// Waits for a child at most `limit` seconds; kills it past that. Returns the seconds taken.
double wait_for(pid_t pid, double limit, int* status) {
  const auto t0 = Clock::now();
  for (;;) {
    if (waitpid(pid, status, WNOHANG) == pid) break;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, status, 0);
      return 1e9;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

json result_of(const std::string& text) {
  const json doc = json::parse(text);
  return doc.at("results").at(0);
}

TEST(Distributed, WorkersIsAConfigParameterThatRoundTrips) {
  const tb::Config c = tb::parse_config("fc:nodes=32,workers=4");
  EXPECT_EQ(c.get_int("workers"), 4);
  EXPECT_NE(c.str().find(",workers=4"), std::string::npos);
  EXPECT_EQ(tb::parse_config(c.str()), c);
  EXPECT_EQ(tb::parse_config("fc:nodes=32").get_int("workers"), 1);
  // At its default it stays out of the text, as before the parameter existed.
  EXPECT_EQ(tb::parse_config("fc:nodes=32,workers=1").str().find("workers"), std::string::npos);
  EXPECT_EQ(tb::parse_config("fc:nodes=32,workers=1"), tb::parse_config("fc:nodes=32"));
  EXPECT_THROW(tb::parse_config("fc:workers=0"), tb::UsageError);
  const Timed bad = sh(TB_BINARY " run fc:nodes=8 --workers 0");
  EXPECT_EQ(bad.status, 2);
  const Timed env = sh("RANK=0 WORLD_SIZE=2 " TB_BINARY " run fc:nodes=8 --workers 2");
  EXPECT_EQ(env.status, 2) << env.err;
  EXPECT_NE(env.err.find("MASTER_ADDR"), std::string::npos) << env.err;
}

TEST(Distributed, TwoLocalWorkersAllReduceEveryStep) {
  const Timed o =
      sh(TB_BINARY " run " + kShardedFc + " --workers 2 --steps 30 --bucket-mib 0.01 --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json r = result_of(o.out);
  EXPECT_EQ(r["status"], "ok");
  EXPECT_NE(r["config"].get<std::string>().find("workers=2"), std::string::npos);
  const json& d = r.at("distributed");
  EXPECT_EQ(d["workers"], 2);
  EXPECT_EQ(d["launch"], "local");
  ASSERT_EQ(d["per_worker"].size(), 2u);
  // fc 32 -> 64 -> 64 -> 8 with biases, in fp32.
  const int64_t params = 32 * 64 + 64 + 64 * 64 + 64 + 64 * 8 + 8;
  EXPECT_EQ(d["allreduce_bytes_per_step"], params * 4);
  EXPECT_GE(d["buckets"].get<int>(), 2);  // 10 KiB buckets: several, launched during backward
  const double share = d["comm_share"];
  EXPECT_GE(share, 0);
  EXPECT_LE(share, 1);
  EXPECT_GT(d["allreduce_busy_s"].get<double>(), 0);
  EXPECT_NEAR(d["examples_per_s"].get<double>(),
              d["per_worker"][0]["examples_per_s"].get<double>() +
                  d["per_worker"][1]["examples_per_s"].get<double>(),
              1e-6);
  EXPECT_EQ(r["metrics"]["examples_per_step"], 32);
  EXPECT_EQ(r["timing"]["steps"], 30);
}

// ZeRO-1 changes where the optimizer state lives, not the arithmetic: after the same steps on
// the same data its weights equal plain data parallelism's (whose averaged gradient is the
// combined batch's), and each rank holds its shard of the state, as `cost` predicts.
TEST(Distributed, ZeroOneShardsTheOptimizerStateAndTrainsTheSameWeights) {
  const std::string gpt =
      "gpt:layers=2,d_model=64,heads=4,kv_heads=2,act=swiglu,norm=rmsnorm,pos=rope,seq=32,"
      "vocab=300,tied=off,bias=off,batch=2,threads=1";
  json runs[2];
  for (int zero : {0, 1}) {
    const Timed o = sh(TB_BINARY " run " + gpt + ",zero=" + std::to_string(zero) +
                       " --workers 2 --steps 6 --json");
    ASSERT_EQ(o.status, 0) << o.err << o.out;
    runs[zero] = result_of(o.out);
    ASSERT_EQ(runs[zero]["status"], "ok") << runs[zero].dump();
    const json& d = runs[zero]["distributed"];
    EXPECT_EQ(d["zero"], zero);
    // measured on rank 0 against the per-worker estimate
    EXPECT_EQ(d["optimizer_state_bytes"].get<double>(),
              runs[zero]["cost"]["memory_estimate_bytes"]["optimizer_state"].get<double>());
  }
  const json &plain = runs[0]["distributed"], &zero1 = runs[1]["distributed"];
  // One worker with the combined batch (rank 0's examples, then rank 1's: their seeds as
  // runner/distributed.cc makes them), for as many steps, ends at the same weights.
  {
    const int64_t steps = int64_t(runs[0]["step_times_s"].size());
    ASSERT_EQ(steps, int64_t(runs[1]["step_times_s"].size()));
    const uint64_t seed = 1;  // RunOptions' default, as the runs above took it
    auto t = tb::prepare_training(tb::parse_config(gpt), torch::kCPU, seed);
    const tb::Batch b1 = t.workload->make_batch(torch::kCPU, torch::kFloat32, seed + 7919);
    tb::Batch both = t.batch;
    both.inputs[0] = torch::cat({t.batch.inputs[0], b1.inputs[0]});
    both.target = torch::cat({t.batch.target, b1.target});
    for (int64_t i = 0; i < steps; ++i)
      tb::train_step(*t.workload, *t.optimizer, both, torch::kCPU);
    double sum = 0, squares = 0;
    for (const auto& p : t.workload->module().parameters()) {
      const auto d = p.detach().to(torch::kDouble);
      sum += d.sum().item<double>();
      squares += d.pow(2).sum().item<double>();
    }
    EXPECT_NEAR(sum, plain["weights_sum"].get<double>(), 1e-6 * std::abs(sum)) << steps;
    EXPECT_NEAR(squares, plain["weights_sum_of_squares"].get<double>(), 1e-6 * squares);
    EXPECT_NEAR(sum, zero1["weights_sum"].get<double>(), 1e-6 * std::abs(sum));
  }
  EXPECT_NEAR(zero1["weights_sum"].get<double>(), plain["weights_sum"].get<double>(),
              1e-9 * std::abs(plain["weights_sum"].get<double>()));
  EXPECT_NEAR(zero1["weights_sum_of_squares"].get<double>(),
              plain["weights_sum_of_squares"].get<double>(),
              1e-9 * plain["weights_sum_of_squares"].get<double>());
  // 137,024 parameters: an even split, AdamW's two moments each
  const int64_t params = runs[0]["cost"]["params"];
  EXPECT_EQ(plain["optimizer_state_bytes"].get<double>(), 2.0 * 4 * params);
  EXPECT_EQ(zero1["optimizer_state_bytes"].get<double>(), 2.0 * 4 * ((params + 1) / 2));
  EXPECT_GT(zero1["allgather_bytes_per_step"].get<double>(), 0);

  // Stages 2 and 3 are predicted, not run; any stage needs workers.
  const Timed two = sh(TB_BINARY " run " + gpt + ",zero=2 --workers 2 --steps 2 --json");
  EXPECT_EQ(two.status, 1) << two.err;
  EXPECT_EQ(result_of(two.out)["status"], "unsupported");
  const Timed alone = sh(TB_BINARY " run " + gpt + ",zero=1 --steps 2");
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("zero=1"), std::string::npos) << alone.err;
}

TEST(Distributed, ARankThatDiesEndsTheOthersWithinTheTimeout) {
  const int port = free_port();
  const std::string out0 = temp_path("rank0.json"), out1 = temp_path("rank1.json");
  const std::string args =
      kShardedFc + " --workers 2 --budget 60 --target-ci 0.0001 --dist-timeout 5 --json";
  const pid_t r0 = start_rank(0, 2, port, args, out0);
  const pid_t r1 = start_rank(1, 2, port, args, out1);
  // Killed once it has joined and trained a moment: the failure is then mid-run.
  for (int i = 0; i < 600 && read_text(out1 + ".err").find("joined") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  kill(r1, SIGKILL);
  int status = 0, status1 = 0;
  waitpid(r1, &status1, 0);
  const double took = wait_for(r0, 30, &status);
  ASSERT_LT(took, 30) << "rank 0 hung after its peer died";
  ASSERT_EQ(WEXITSTATUS(status), 1) << read_text(out0 + ".err");
  const json r = result_of(read_text(out0));
  EXPECT_EQ(r["status"], "crashed");
  EXPECT_NE(r["error"].get<std::string>().find("rank 0: communication failed at step"),
            std::string::npos)
      << r["error"];
}

TEST(Distributed, AWorkerThatNeverJoinsEndsTheRunWithinTheTimeout) {
  const int port = free_port();
  const std::string out0 = temp_path("lonely0.json"), out2 = temp_path("lonely2.json");
  // WORLD_SIZE=3 but only ranks 0 and 2 come.
  const std::string args = kShardedFc + " --workers 3 --steps 5 --dist-timeout 3 --json";
  const pid_t r0 = start_rank(0, 3, port, args, out0);
  const pid_t r2 = start_rank(2, 3, port, args, out2);
  int s0 = 0, s2 = 0;
  const double t0 = wait_for(r0, 30, &s0), t2 = wait_for(r2, 30, &s2);
  ASSERT_LT(t0, 30) << "rank 0 hung waiting for a missing worker";
  ASSERT_LT(t2, 30) << "rank 2 hung waiting for a missing worker";
  ASSERT_EQ(WEXITSTATUS(s0), 1) << read_text(out0 + ".err");
  EXPECT_EQ(WEXITSTATUS(s2), 1) << read_text(out2 + ".err");
  const json r = result_of(read_text(out0));
  EXPECT_EQ(r["status"], "crashed");
  EXPECT_NE(r["error"].get<std::string>().find("did not assemble"), std::string::npos)
      << r["error"];
}

// A sweep over 1 and 2 workers lands in the store with its communication columns and
// shows up in the scaling view as a workers series.
TEST(Distributed, WorkerRunsReachTheStoreAndTheScalingView) {
  const std::string sweep = temp_path("workers.toml"), store = temp_path("workers.db");
  std::remove(store.c_str());
  std::ofstream(sweep) << "name = \"workers\"\nbudget = 0.3\nrepetitions = 1\n[[grid]]\nfamily = "
                          "\"fc\"\nlayers = 2\nnodes = 64\n"
                          "input = 32\noutput = 8\nbatch = 16\nthreads = 1\nworkers = [1, 2]\n";
  const Timed s = sh(TB_BINARY " sweep " + sweep + " --store " + store);
  ASSERT_EQ(s.status, 0) << s.err;
  auto db = tb::Store::open_read_only(store);
  int with_comm = 0;
  for (const auto& row : db->runs()) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    if (row.contains("comm_share") && row["comm_share"].is_number()) {
      ++with_comm;
      EXPECT_EQ(row["workers"], 2);
      EXPECT_GT(row["allreduce_bytes_per_step"].get<double>(), 0);
    }
  }
  EXPECT_EQ(with_comm, 1);
  const Timed v = sh(TB_BINARY " analyze scaling " + store);
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find("workers=*"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("efficiency"), std::string::npos) << v.out;
  // A fraction, or, where two workers of this small config are slower than one (the
  // all-reduce outweighs a step of microseconds), the note that the law does not fit.
  EXPECT_TRUE(v.out.find("Amdahl non-parallel fraction") != std::string::npos ||
              v.out.find("Amdahl: slower with more workers than with one") != std::string::npos)
      << v.out;
}

// Two ranks in two network namespaces joined by a veth pair shaped to 1 Gbit/s.
TEST(Distributed, WorkersInSeparateNetworkNamespaces) {
  if (geteuid() != 0 ||
      system("command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "needs root (CAP_NET_ADMIN) and iproute2's ip and tc to make network namespaces";
  const std::string id = std::to_string(getpid() % 100000);
  const std::string a = "tbA" + id, b = "tbB" + id, va = "tva" + id, vb = "tvb" + id;
  const int net = 16 + getpid() % 200;  // 10.<net>.9.0/24: unlikely to meet another test's
  const std::string ip_a = "10." + std::to_string(net) + ".9.1",
                    ip_b = "10." + std::to_string(net) + ".9.2";
  auto cleanup = [&] {
    (void)!system(
        ("ip netns del " + a + " 2>/dev/null; ip netns del " + b + " 2>/dev/null").c_str());
  };
  cleanup();
  const std::string setup =
      "set -e; ip netns add " + a + "; ip netns add " + b + "; ip link add " + va +
      " type veth peer name " + vb + "; ip link set " + va + " netns " + a + "; ip link set " + vb +
      " netns " + b + "; ip -n " + a + " addr add " + ip_a + "/24 dev " + va + "; ip -n " + b +
      " addr add " + ip_b + "/24 dev " + vb + "; for n in " + a + " " + b +
      "; do ip -n $n link set lo up; done; ip -n " + a + " link set " + va + " up; ip -n " + b +
      " link set " + vb + " up; ip netns exec " + a + " tc qdisc add dev " + va +
      " root tbf rate 1gbit burst 128kb latency 50ms; ip netns exec " + b + " tc qdisc add dev " +
      vb + " root tbf rate 1gbit burst 128kb latency 50ms";
  if (system((setup + " 2>/dev/null").c_str()) != 0) {
    cleanup();
    GTEST_SKIP() << "cannot create network namespaces here (no CAP_NET_ADMIN in this sandbox?)";
  }
  const std::string args = kShardedFc + " --workers 2 --steps 20 --dist-timeout 20 --json";
  auto rank_cmd = [&](const std::string& ns, const std::string& dev, int rank) {
    return "ip netns exec " + ns + " env RANK=" + std::to_string(rank) +
           " WORLD_SIZE=2 MASTER_ADDR=" + ip_a + " MASTER_PORT=29611 GLOO_SOCKET_IFNAME=" + dev +
           " " TB_BINARY " run " + args;
  };
  const std::string out1 = temp_path("ns1.json");
  const std::string both =
      "(" + rank_cmd(b, vb, 1) + " >" + out1 + " 2>&1 &) ; " + rank_cmd(a, va, 0);
  const Timed o = sh(both);
  // Traffic went over the shaped veth pair: its counters moved.
  const Timed tc = sh("ip netns exec " + a + " tc -s qdisc show dev " + va);
  cleanup();
  ASSERT_EQ(o.status, 0) << o.err << o.out << read_text(out1);
  const json r = result_of(o.out);
  EXPECT_EQ(r["status"], "ok");
  EXPECT_EQ(r["distributed"]["launch"], "external");
  EXPECT_NE(tc.out.find("tbf"), std::string::npos) << tc.out;
  EXPECT_EQ(tc.out.find("Sent 0 bytes"), std::string::npos) << tc.out;
}

std::set<std::string> configs_in(const std::string& path) {
  std::set<std::string> out;
  for (const auto& row : tb::Store::open_read_only(path)->runs())
    out.insert(row["config"].get<std::string>());
  return out;
}

// mpirun -n 3 trainbench sweep ... --shard auto, with the ranks started here as MPI
// would start them, against one unsplit run of the same sweep.
TEST(Distributed, ASweepSplitOverThreeShardsMergesToTheUnsplitConfigs) {
  const std::string sweep = temp_path("tiny.toml"), all = temp_path("all.db"),
                    merged = temp_path("merged.db");
  for (const auto& f : {all, merged}) std::remove(f.c_str());
  for (int i = 1; i <= 3; ++i) {
    const std::string shard = temp_path("merged.shard-" + std::to_string(i) + "-of-3.db");
    std::remove(shard.c_str());
    std::remove((shard + ".done").c_str());
  }
  std::ofstream(sweep)
      << "name = \"tiny\"\nbudget = 0.05\nrepetitions = 1\n[[grid]]\nfamily = \"fc\"\nlayers = 1\n"
         "nodes = [8, 16, 32]\ninput = 8\noutput = 2\nbatch = [2, 4]\nthreads = 1\n";
  std::string cmd = "(";
  for (int rank = 2; rank >= 0; --rank)  // rank 0 last: it must wait for the others
    cmd += "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) +
           " OMPI_COMM_WORLD_SIZE=3 " TB_BINARY " sweep " + sweep + " --shard auto --store " +
           merged + " --merge-timeout 120" + (rank ? " & " : "; wait)");
  const Timed m = sh(cmd);
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.err.find("merged 3 shard stores"), std::string::npos) << m.err;
  const Timed u = sh(TB_BINARY " sweep " + sweep + " --store " + all);
  ASSERT_EQ(u.status, 0) << u.err;
  const auto want = configs_in(all);
  EXPECT_EQ(want.size(), 6u);
  EXPECT_EQ(configs_in(merged), want);
  // Each shard holds only its own configs.
  size_t sum = 0;
  for (int i = 1; i <= 3; ++i)
    sum += configs_in(temp_path("merged.shard-" + std::to_string(i) + "-of-3.db")).size();
  EXPECT_EQ(sum, 6u);
}

}  // namespace
