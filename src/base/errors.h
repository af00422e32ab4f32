#pragma once
#include <stdexcept>
#include <string>

namespace tb {

// Bad input from the user: a config string, a flag, a file. The CLI turns it into
// a one-line message and exit status 2; nothing has been run when it is thrown.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

// A well-formed config naming a model that cannot be trained: a missing or broken
// TorchScript file, an input shape the module rejects. Unlike UsageError it only becomes
// known while building the model, so the run reports it as status `invalid` (a sweep
// records it and goes on); `trainbench run` still exits 2 with its one line.
class InvalidModel : public std::runtime_error {
 public:
  explicit InvalidModel(const std::string& what) : std::runtime_error(what) {}
};

// A well-formed config asking for something this build or this family cannot do (emulated
// activation formats in a family without activation points, ...): status `unsupported`.
class Unsupported : public std::runtime_error {
 public:
  explicit Unsupported(const std::string& what) : std::runtime_error(what) {}
};

// Something outside trainbench refused a write it needs: a full disk, a read-only file or
// filesystem. Not a bug and not bad input: the CLI prints its one line (which says what was
// kept and how to go on) and exits 3, without the "internal error" label.
class StorageError : public std::runtime_error {
 public:
  explicit StorageError(const std::string& what) : std::runtime_error(what) {}
};

// The first line of an exception's message (LibTorch's carry a backtrace after it): what a
// one-line error or a recorded failure reason shows.
inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace tb
