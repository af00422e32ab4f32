#include "jobs/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

extern char** environ;

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

LaunchOutcome launch_local(const LaunchOptions& o) {
  // The launcher holds the rendezvous store, so that no worker has to be first and the
  // port is one the kernel chose free.
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(int64_t(o.timeout_s * 1000));
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  const int port = store->getPort();

  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp && *tmp ? tmp : "/tmp";
  std::vector<std::string> outputs;
  std::vector<pid_t> pids;
  auto kill_all = [&] {
    for (pid_t p : pids)
      if (p > 0) kill(p, SIGKILL);
  };
  // Everything a child needs is built before fork(): after it only exec-safe calls.
  std::vector<std::string> argv_s = {o.binary};
  argv_s.insert(argv_s.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  static const std::vector<std::string> ours = {
      "RANK=",        "WORLD_SIZE=",  "LOCAL_RANK=",      "LOCAL_WORLD_SIZE=",
      "MASTER_ADDR=", "MASTER_PORT=", "TB_STORE_HOSTED=", "TB_LOCAL_WORKERS="};
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e) {
    bool replaced = false;
    for (const auto& p : ours) replaced |= strncmp(*e, p.c_str(), p.size()) == 0;
    if (!replaced) base_env.push_back(*e);
  }
  for (int rank = 0; rank < o.workers; ++rank) {
    std::vector<std::string> env_s = base_env;
    for (const auto& kv :
         {fmt::format("RANK={}", rank), fmt::format("WORLD_SIZE={}", o.workers),
          fmt::format("LOCAL_RANK={}", rank), fmt::format("LOCAL_WORLD_SIZE={}", o.workers),
          std::string("MASTER_ADDR=127.0.0.1"), fmt::format("MASTER_PORT={}", port),
          std::string("TB_STORE_HOSTED=1"), std::string("TB_LOCAL_WORKERS=1")})
      env_s.push_back(kv);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string out = fmt::format("{}/trainbench-worker-{}-{}-XXXXXX", dir, getpid(), rank);
    const int fd = mkstemp(out.data());
    if (fd < 0) {
      kill_all();
      throw std::runtime_error(fmt::format("cannot create {}: {}", out, strerror(errno)));
    }
    outputs.push_back(out);
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a launcher killed takes its workers along
      dup2(fd, STDOUT_FILENO);
      close(fd);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(fd);
    if (pid < 0) {
      kill_all();
      throw std::runtime_error(fmt::format("fork: {}", strerror(errno)));
    }
    pids.push_back(pid);
  }

  LaunchOutcome outcome;
  std::vector<int> statuses(pids.size(), -1);
  size_t running = pids.size();
  Clock::time_point kill_at = Clock::time_point::max();  // max: no worker has failed
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t k = 0; k < pids.size(); ++k)
        if (pids[k] == pid) {
          statuses[k] = status;
          pids[k] = -1;
          --running;
          if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            outcome.errors.push_back(fmt::format("worker {} {}", k, describe_exit(status)));
            // The others should see the failure by themselves, within their timeout.
            if (kill_at == Clock::time_point::max())
              kill_at =
                  Clock::now() + std::chrono::milliseconds(int64_t(o.timeout_s * 1000) + 5000);
          }
        }
      continue;
    }
    if (Clock::now() > kill_at) {
      for (size_t k = 0; k < pids.size(); ++k)
        if (pids[k] > 0)
          outcome.errors.push_back(
              fmt::format("worker {} still running after the failure: killed", k));
      kill_all();
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  const std::string text = read_all(outputs[0]);
  for (const auto& f : outputs) unlink(f.c_str());
  try {
    const auto doc = nlohmann::json::parse(text);
    if (doc.contains("results") && !doc["results"].empty()) outcome.result = doc["results"][0];
  } catch (const std::exception&) {
  }
  outcome.exit_status =
      outcome.result.is_null() ? 1 : (WIFEXITED(statuses[0]) ? WEXITSTATUS(statuses[0]) : 1);
  return outcome;
}

}  // namespace tb
