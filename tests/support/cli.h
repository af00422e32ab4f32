#pragma once
// Runs the trainbench program as a user would and captures what it says.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tb::testing {

struct CliOutput {
  int status;  // exit status, -1 if killed by a signal
  std::string out, err;
};

// `env` is prepended to the command line ("VAR=value ..."). stderr goes through a file
// named after the process, since ctest -j runs several test processes at once.
inline CliOutput run_cli(const std::string& args, const std::string& env = "") {
  const std::string err_file =
      ::testing::TempDir() + "/tb_cli_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string cmd = env + " " TB_BINARY " " + args + " 2>" + err_file;
  CliOutput o;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  const int raw = pclose(p);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  o.err = ss.str();
  return o;
}

}  // namespace tb::testing
