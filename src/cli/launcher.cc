// `trainbench`: sets the environment trainbench runs in (platform/runtime_env.h), then executes
// the program itself, trainbench-core, from the same directory with the same arguments. The
// environment must be set before the process starts, because the OpenMP runtime, malloc and the
// dynamic linker (which BLAS LibTorch binds to) read it only then; deciding it here, without
// LibTorch, spares every command the LibTorch load of a re-execution (~0.4 s on a 2-core VM).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "platform/runtime_env.h"

int main(int argc, char** argv) {
  (void)argc;
  tb::set_runtime_environment();
  char self[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string core = "trainbench-core";
  if (len > 0) {
    const std::string path(self, size_t(len));
    core = path.substr(0, path.rfind('/') + 1) + core;
  }
  execv(core.c_str(), argv);
  std::fprintf(stderr, "trainbench: cannot run %s: %s\n", core.c_str(), std::strerror(errno));
  return 1;
}
