#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spec/config.h"

namespace tb {

// A sweep: one or more grids (a family and, per hyperparameter, the values to take),
// exclusions, and how to run each config. Written in TOML (docs/sweeps.md):
//
//   name = "fc-small"
//   [[grid]]
//   family = "fc"
//   layers = [4, 8]
//   nodes = "32..8192 x2"      # geometric range
//   input = "2000..8000 +2000" # arithmetic range
//   dtype = ["fp32", "bf16"]
//   [[exclude]]
//   nodes = 8192
//   batch = [8192, 16384]
struct SweepAxis {
  std::string name;
  std::vector<std::string> values;
};
struct SweepGrid {
  std::string family;
  std::vector<SweepAxis> axes;  // in the family's parameter order
  uint64_t size() const;
};
struct SweepSpec {
  std::string name, description, origin;  // origin: file path or "built-in"
  std::vector<SweepGrid> grids;
  std::vector<std::map<std::string, std::vector<std::string>>> excludes;
  double budget_s = 10;  // per config, timed loop
  double timeout_s = 0;  // per config, whole child process; 0: derived from the budget
  double target_ci = 0.01;
  // Processes each config is measured in; 0: kSweepRepetitions.
  int repetitions = 0;
  // Software stacks every config runs under (`stacks = ["blas=openblas-pthread",
  // "blas=blis-pthread"]`); empty: the default stack only.
  std::vector<std::string> stacks;
};

// How many fresh processes a sweep measures each config in unless told otherwise: two, so
// that every stored config has a spread between processes (docs/sweeps.md says why two).
inline constexpr int kSweepRepetitions = 2;

// Parses a TOML sweep. Errors are UsageError: "file:line: key 'nodes': empty range ...".
SweepSpec parse_sweep(const std::string& toml_text, const std::string& origin);
SweepSpec load_sweep_file(const std::string& path);

// Built-in sweeps: files of the sweeps/ directory shipped with trainbench.
std::vector<std::string> builtin_sweep_names();
SweepSpec find_sweep(const std::string& name_or_path);

// A combination of a grid's values that is no config (gpt: d_model=100 with heads=12): the
// values joined as a config string would write them, and why.
struct InvalidCell {
  std::string config, reason;
};

// Every config of the sweep, in a deterministic order, exclusions applied. Refuses grids
// larger than `limit` configs (UsageError) before expanding them. Combinations whose values
// do not go together are left out and listed in `invalid`; a sweep none of whose
// combinations is a config is a UsageError naming the first one's reason.
std::vector<Config> expand_sweep(const SweepSpec& s, uint64_t limit = 2000000,
                                 std::vector<InvalidCell>* invalid = nullptr);

// `--filter "family=fc,nodes>=1024,batch<4096"`: every condition must hold.
struct Filter {
  struct Condition {
    std::string key, op, value;
  };
  std::vector<Condition> conditions;
  bool matches(const Config& c) const;
};
Filter parse_filter(const std::string& text);
// UsageError naming a filter key that no grid of the sweep has (a typo would keep nothing).
void check_filter(const Filter& f, const SweepSpec& s);

// Random or Latin-hypercube sample of n configs (without repetition), deterministic in seed.
std::vector<Config> sample_configs(const std::vector<Config>& configs, const SweepSpec& s, size_t n,
                                   uint64_t seed, bool latin_hypercube);

// A sample of n configs spread evenly over the cells of the named axes (`--stratify
// nodes,batch`): every combination of their values that the configs reach gets n / cells
// configs, or one more, the other hyperparameters drawn at random (deterministic in seed), so
// a heat map over those axes is filled by a few runs per cell. UsageError when an axis is not
// a parameter of every config.
std::vector<Config> stratified_sample(const std::vector<Config>& configs, size_t n, uint64_t seed,
                                      const std::vector<std::string>& axes);

// Shard i of n (1-based): every n-th config of the ordered list, starting at i-1.
std::vector<Config> shard(const std::vector<Config>& configs, int i, int n);
std::pair<int, int> parse_shard(const std::string& text);  // "2/8"

}  // namespace tb
