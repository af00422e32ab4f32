#pragma once
// Runs the trainbench program as a user would and captures what it says.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/files.h"

namespace tb::testing {

struct CliOutput {
  int status;  // exit status, -1 if killed by a signal
  std::string out, err;
};

// `env` is prepended to the command line ("VAR=value ..."). stderr goes through a file
// named after the process and the call, since ctest -j runs several test processes at once
// and run_cli_all several calls.
inline CliOutput run_cli(const std::string& args, const std::string& env = "") {
  static std::atomic<unsigned> calls{0};
  const std::string err_file = ::testing::TempDir() + "/tb_cli_stderr_" + std::to_string(getpid()) +
                               "_" + std::to_string(calls++) + ".txt";
  const std::string cmd = env + " " TB_BINARY " " + args + " 2>" + err_file;
  CliOutput o;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  const int raw = pclose(p);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  o.err = read_text(err_file);
  std::remove(err_file.c_str());
  return o;
}

// The CLI tests' shorthands, shared so that files built in one unity batch (tests/CMakeLists.txt)
// do not define them twice: a file says `using ::tb::testing::run;`.
inline CliOutput run(const std::string& args, const std::string& env = "") {
  return run_cli(args, env);
}
inline int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// run_cli() of each command line, up to one per online core at a time; the outputs in the
// order given. For tests that check what each invocation says, not how fast it runs: a
// trainbench process spends about a second loading LibTorch, mostly on one core.
inline std::vector<CliOutput> run_cli_all(const std::vector<std::string>& args,
                                          const std::string& env = "") {
  std::vector<CliOutput> out(args.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < args.size();) out[i] = run_cli(args[i], env);
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < std::min<size_t>(cores, args.size()); ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

// Cases whose `first` is a command line: run_cli_all() of them, then check(case, output) for
// each, in order.
template <typename Cases, typename Check>
void run_cli_cases(const Cases& cases, Check check) {
  std::vector<std::string> args;
  for (const auto& c : cases) args.push_back(std::string(c.first));
  const std::vector<CliOutput> outputs = run_cli_all(args);
  size_t i = 0;
  for (const auto& c : cases) check(c, outputs[i++]);
}

}  // namespace tb::testing
