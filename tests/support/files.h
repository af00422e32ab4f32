#pragma once
// Reading back what a test or the program under test wrote.
#include <fstream>
#include <sstream>
#include <string>

namespace tb::testing {

// The whole file as bytes; empty where it cannot be read (the assertions then say what is
// missing).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tb::testing
