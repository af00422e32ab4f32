// Small helpers shared by the benchmark programs under bench/ (not part of the library).
// The machine these run on is shared and noisy: every benchmark compares two things
// measured in the same process, interleaved (A B A B ...), and reports medians.
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "record/context.h"
#include "record/json.h"
#include "runner/runner.h"
#include "runner/threads.h"

#ifndef TB_BENCH_RESULTS_DIR
#define TB_BENCH_RESULTS_DIR "bench/results"
#endif

namespace tb::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Command line shared by the C++ benchmarks: --out PATH, --reps N, --config C (repeatable,
// replaces the defaults), --help.
struct Args {
  std::string out;
  int reps = 0;  // 0: the benchmark's default
  std::vector<std::string> configs;
  std::vector<std::pair<std::string, std::string>> extra;  // --key value pairs not known here
};

inline Args parse_args(int argc, char** argv, const std::string& name, const std::string& usage) {
  Args a;
  a.out = std::string(TB_BENCH_RESULTS_DIR) + "/" + name + ".json";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << name << ": " << k << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--help" || k == "-h") {
      std::cout << usage << "\n";
      std::exit(0);
    } else if (k == "--out") {
      a.out = value();
    } else if (k == "--reps") {
      a.reps = std::atoi(value().c_str());
    } else if (k == "--config") {
      a.configs.push_back(value());
    } else if (k.rfind("--", 0) == 0) {
      a.extra.emplace_back(k.substr(2), value());
    } else {
      std::cerr << name << ": unexpected argument '" << k << "'\n" << usage << "\n";
      std::exit(2);
    }
  }
  return a;
}

inline double extra_number(const Args& a, const std::string& key, double fallback) {
  for (const auto& [k, v] : a.extra)
    if (k == key) return std::atof(v.c_str());
  return fallback;
}

// The 1/5/15-minute load averages: on a shared machine, a witness of how busy it was.
inline std::vector<double> load_average() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  f >> a >> b >> c;
  return {a, b, c};
}

inline void write_json(const std::string& path, nlohmann::json doc) {
  doc["load_average_at_end"] = load_average();
  // The context as the runs left it (threads are applied by run_config, not at start).
  doc["context"] = tb::to_json(tb::current_context());
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream f(p);
  f << doc.dump(2) << "\n";
  if (!f) {
    std::cerr << "could not write " << path << "\n";
    std::exit(1);
  }
  std::cout << "wrote " << path << "\n";
}

// What every C++ benchmark's result document carries: schema_version and kind, as trainbench's
// own documents and the scripted benchmarks' ("trainbench.bench.<name>"), and the same context
// block `trainbench run --json` has.
inline nlohmann::json document(const std::string& name) {
  return {{"schema_version", tb::kSchemaVersion},
          {"kind", "trainbench.bench." + name},
          {"benchmark", name},
          {"context", tb::to_json(tb::current_context())},
          {"trainbench_version", tb::trainbench_version_string()},
          {"load_average_at_start", load_average()}};
}

// A measurement repeated inside one process sees that process's memory layout and thread
// placement every time; the figures a user gets come from new processes. This runs the
// benchmark again in `n` fresh processes, one after another, each with `--processes 1` and
// its own --out, echoing their output, and returns their JSON documents.
inline std::vector<nlohmann::json> in_fresh_processes(int argc, char** argv, int n,
                                                      const std::string& name) {
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::cerr << name << ": cannot find its own executable\n";
    std::exit(1);
  }
  auto quote = [](const std::string& a) {
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string base = quote(self);
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if ((k == "--processes" || k == "--out") && i + 1 < argc) {
      ++i;
      continue;
    }
    base += " " + quote(k);
  }
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::vector<nlohmann::json> docs;
  for (int k = 0; k < n; ++k) {
    const std::string out = fmt::format("{}/{}-{}-process-{}.json", dir, name, getpid(), k + 1);
    std::cout << fmt::format("\n######## process {}/{}\n", k + 1, n) << std::flush;
    const int rc = std::system((base + " --processes 1 --out " + quote(out)).c_str());
    std::ifstream in(out);
    if (rc != 0 || !in) {
      std::cerr << name << ": process " << k + 1 << " failed (status " << rc << ")\n";
      std::exit(1);
    }
    docs.push_back(nlohmann::json::parse(in));
    std::filesystem::remove(out);
  }
  return docs;
}

inline std::string fmt_time(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace tb::bench
