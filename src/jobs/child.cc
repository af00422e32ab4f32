#include "jobs/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

namespace tb {
namespace {

std::string tail_lines(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::string t = s.substr(s.size() - max_bytes);
  const auto nl = t.find('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

ChildOutcome run_child(const std::vector<std::string>& args, const ChildOptions& o) {
  ChildOutcome out;
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      if (fd >= 0) close(fd);
  };
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + strerror(errno);
    out.harness_error = true;
    close_all();
    return out;
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(o.binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    out.error = std::string("fork: ") + strerror(errno);
    out.harness_error = true;
    close_all();
    return out;
  }
  if (pid == 0) {
    // Own process group: a Ctrl-C at the terminal reaches the sweep, which decides, and
    // a timeout kills the child's whole group.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a sweep killed with -9 takes its child along
    if (o.memory_limit > 0) {
      rlimit lim{rlim_t(o.memory_limit), rlim_t(o.memory_limit)};
      setrlimit(RLIMIT_DATA, &lim);
    }
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execv(o.binary.c_str(), argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);

  std::string stdout_text, stderr_text;
  bool timed_out = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!timed_out && !out.interrupted) {
      if (elapsed > o.timeout_s) {
        timed_out = true;
        kill(-pid, SIGKILL);
      } else if (o.stop && o.stop->load()) {
        out.interrupted = true;
        kill(-pid, SIGKILL);
      }
    }
    if (poll(fds, 2, 100) < 0 && errno != EINTR) {
      kill(-pid, SIGKILL);  // cannot watch it any more: do not leave it running
      for (auto& f : fds)
        if (f.fd >= 0) close(f.fd), f.fd = -1;
      out.harness_error = true;
      out.error = std::string("poll: ") + strerror(errno);
      break;
    }
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(f.fd, buf, sizeof buf);
      if (n > 0) {
        (f.fd == out_pipe[0] ? stdout_text : stderr_text).append(buf, size_t(n));
        if (stderr_text.size() > (1 << 20)) stderr_text = tail_lines(stderr_text, 1 << 16);
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        close(f.fd);
        f.fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.stderr_tail = tail_lines(stderr_text, 2000);
  if (out.interrupted || out.harness_error) return out;
  if (timed_out) {
    out.status = Status::kTimeout;
    out.error = fmt::format("killed after the {:.0f} s timeout", o.timeout_s);
    return out;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    // Allocations beyond the limit fail inside the child and come back as `oom` with a
    // result; a SIGKILL from outside cannot be told apart from the kernel's OOM killer here.
    out.status = Status::kCrashed;
    if (sig == SIGKILL) {
      out.error = "killed by SIGKILL (the kernel's OOM killer or an outside kill)";
    } else {
      out.status = Status::kCrashed;
      out.error = fmt::format("killed by signal {} ({})", sig, strsignal(sig));
    }
    return out;
  }
  const int code = WEXITSTATUS(status);
  try {
    const auto doc = nlohmann::json::parse(stdout_text);
    out.result = doc.at("results").at(0);
    out.status = status_from_string(out.result.at("status").get<std::string>());
    return out;
  } catch (const std::exception&) {
  }
  // Exit status 2 is a usage error: the harness asked for something the child refused.
  out.harness_error = code == 2 || code == 127;
  out.status = Status::kCrashed;
  std::string last = stderr_text.substr(0, stderr_text.find_last_not_of("\n") + 1);
  last = last.substr(last.find_last_of('\n') + 1);  // the last line only: errors stay one line
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  out.error = fmt::format("exited with status {} without a result{}{}", code,
                          last.empty() ? "" : ": ", last);
  return out;
}

}  // namespace tb
