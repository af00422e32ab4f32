#pragma once
#include <cstdlib>
#include <string>

namespace tb::test {

// Unsets a variable for the scope and puts it back after: for tests whose subject must not
// depend on what the machine's image exports (OPENBLAS_CORETYPE, for one).
struct Unset {
  std::string name, saved;
  bool had;
  explicit Unset(const char* n) : name(n), had(std::getenv(n) != nullptr) {
    if (had) saved = std::getenv(n);
    unsetenv(n);
  }
  ~Unset() {
    if (had) setenv(name.c_str(), saved.c_str(), 1);
  }
};

}  // namespace tb::test
