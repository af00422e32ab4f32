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

}  // namespace tb
