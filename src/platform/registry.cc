#include "platform/registry.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "base/errors.h"

#ifndef TB_PLATFORM_DIR
#define TB_PLATFORM_DIR "platforms"
#endif

namespace tb {
namespace {

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> json_files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> platform_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TRAINBENCH_PLATFORMS")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t colon = s.find(':', start);
      std::string d =
          s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty()) dirs.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"))
    dirs.push_back(std::string(xdg) + "/trainbench/platforms");
  else if (const char* home = std::getenv("HOME"))
    dirs.push_back(std::string(home) + "/.config/trainbench/platforms");
  dirs.push_back(TB_PLATFORM_DIR);
  return dirs;
}

std::vector<PlatformDescription> list_platforms(std::vector<std::string>* problems) {
  std::vector<PlatformDescription> out;
  std::set<std::string> seen;
  for (const auto& dir : platform_dirs())
    for (const auto& file : json_files(dir)) {
      try {
        PlatformDescription p = load_platform_file(file);
        if (seen.insert(p.name).second) out.push_back(std::move(p));
      } catch (const UsageError& e) {
        if (!problems) throw;
        problems->push_back(e.what());
      }
    }
  return out;
}

PlatformDescription find_platform(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || is_file(name_or_path))
    return load_platform_file(name_or_path);
  for (const auto& dir : platform_dirs()) {
    const std::string file = dir + "/" + name_or_path + ".json";
    if (is_file(file)) return load_platform_file(file);
  }
  std::string names;
  std::vector<std::string> problems;
  for (const auto& p : list_platforms(&problems)) names += (names.empty() ? "" : ", ") + p.name;
  throw UsageError("unknown platform '" + name_or_path + "' (known: " + names + ")");
}

}  // namespace tb
