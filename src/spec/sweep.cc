#include "spec/sweep.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "base/files.h"
#include "spec/printable.h"
#include "spec/stack.h"

#ifndef TB_SWEEP_DIR
#define TB_SWEEP_DIR "sweeps"
#endif

namespace tb {
namespace {

[[noreturn]] void fail(const std::string& origin, const toml::source_region& where,
                       const std::string& key, const std::string& why) {
  throw UsageError(fmt::format("{}:{}: key '{}': {}", origin, where.begin.line, key, why));
}

std::vector<std::string> range_values(const std::string& origin, const toml::node& node,
                                      const std::string& key, const std::string& text) {
  // "A..B xK" (geometric) or "A..B +K" (arithmetic), inclusive of B when reached.
  long long a, b, k;
  char op;
  char rest;
  if (std::sscanf(text.c_str(), "%lld..%lld %c%lld %c", &a, &b, &op, &k, &rest) != 4 ||
      (op != 'x' && op != '+'))
    return {};
  if (k <= (op == 'x' ? 1 : 0))
    fail(origin, node.source(), key,
         "step must be > " + std::string(op == 'x' ? "1" : "0") + " in '" + text + "'");
  if (b < a) fail(origin, node.source(), key, "empty range '" + text + "'");
  std::vector<std::string> out;
  if (op == 'x' && a <= 0) fail(origin, node.source(), key, "geometric range must start above 0");
  for (long long v = a; v <= b;) {
    out.push_back(std::to_string(v));
    if (out.size() > 100000) fail(origin, node.source(), key, "range '" + text + "' is too long");
    if (op == 'x' ? v > b / k : v > b - k) break;  // the next value would pass b (or overflow)
    v = op == 'x' ? v * k : v + k;
  }
  return out;
}

std::vector<std::string> axis_values(const std::string& origin, const toml::node& node,
                                     const std::string& key) {
  auto scalar = [&](const toml::node& n) -> std::string {
    if (auto i = n.as_integer()) return std::to_string(i->get());
    if (auto s = n.as_string()) return s->get();
    fail(origin, n.source(), key, "expected an integer, a string or a list of them");
  };
  if (auto arr = node.as_array()) {
    if (arr->empty()) fail(origin, node.source(), key, "empty list");
    std::vector<std::string> out;
    for (const auto& n : *arr) out.push_back(scalar(n));
    return out;
  }
  if (auto s = node.as_string()) {
    if (s->get().find("..") != std::string::npos) {
      auto r = range_values(origin, node, key, s->get());
      if (r.empty())
        fail(origin, node.source(), key,
             "range '" + s->get() + "' should look like '32..8192 x2' or '2000..8000 +2000'");
      return r;
    }
  }
  return {scalar(node)};
}

double number_in(const std::string& origin, const toml::node& n, const std::string& key, double lo,
                 double hi) {
  double v;
  if (auto i = n.as_integer())
    v = double(i->get());
  else if (auto f = n.as_floating_point())
    v = f->get();
  else
    fail(origin, n.source(), key, "expected a number");
  if (!(v >= lo && v <= hi))
    fail(origin, n.source(), key, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
  return v;
}

}  // namespace

uint64_t SweepGrid::size() const {
  uint64_t n = 1;
  for (const auto& a : axes) {
    if (n > UINT64_MAX / std::max<uint64_t>(a.values.size(), 1)) return UINT64_MAX;
    n *= a.values.size();
  }
  return n;
}

SweepSpec parse_sweep(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
  }
  SweepSpec s;
  s.origin = origin;
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    if (key == "name" || key == "description") {
      auto v = node.as_string();
      if (!v) fail(origin, node.source(), key, "expected a string");
      // The name goes into every stored run's `sweep` column and exports: text, not a terminal
      // escape or a line break.
      const std::string& text = v->get();
      if (std::any_of(text.begin(), text.end(),
                      [](char ch) { return (unsigned char)ch < 0x20 || ch == 0x7F; }))
        fail(origin, node.source(), key,
             "'" + printable(text) + "' holds a control character (a line break, an escape)");
      (key == "name" ? s.name : s.description) = text;
    } else if (key == "budget") {
      s.budget_s = number_in(origin, node, key, 0.01, 1e6);  // the ranges `run` accepts
    } else if (key == "timeout") {
      s.timeout_s = number_in(origin, node, key, 0.1, 1e7);
    } else if (key == "target_ci") {
      s.target_ci = number_in(origin, node, key, 1e-4, 0.5);
    } else if (key == "repetitions") {
      const double n = number_in(origin, node, key, 1, 100);
      if (n != std::floor(n))
        fail(origin, node.source(), key, "expected a whole number of processes");
      s.repetitions = int(n);
    } else if (key == "stacks") {
      auto arr = node.as_array();
      if (!arr) fail(origin, node.source(), key, "expected a list of stack strings");
      for (const auto& e : *arr) {
        auto v = e.as_string();
        if (!v)
          fail(origin, e.source(), key, "expected a string like \"blas=blis-pthread,onednn=off\"");
        try {
          s.stacks.push_back(parse_stack(v->get()).str());
        } catch (const UsageError& err) {
          fail(origin, e.source(), key, err.what());
        }
      }
    } else if (key == "grid" || key == "exclude") {
      auto arr = node.as_array();
      if (!arr || !arr->is_array_of_tables())
        fail(origin, node.source(), key, "expected [[" + key + "]] tables");
    } else {
      fail(origin, node.source(), key,
           "unknown key (expected name, description, budget, timeout, target_ci, repetitions, "
           "stacks, "
           "[[grid]], [[exclude]])");
    }
  }
  const toml::array* grids = root["grid"].as_array();
  if (!grids || grids->empty()) throw UsageError(origin + ": no [[grid]] table: nothing to sweep");
  for (const auto& g : *grids) {
    const toml::table& t = *g.as_table();
    auto fam = t["family"].as_string();
    if (!fam) fail(origin, t.source(), "family", "missing or not a string");
    const FamilySchema* schema = find_family_schema(fam->get());
    if (!schema) {
      std::string names;
      for (const auto* f : family_schemas()) names += (names.empty() ? "" : ", ") + f->name;
      fail(origin, fam->source(), "family",
           "unknown family '" + fam->get() + "' (known: " + names + ")");
    }
    SweepGrid grid{schema->name, {}};
    // Values are checked one by one (range, choices), in a config whose other parameters take
    // the grid's first values (torchscript's required path). Whether values go together
    // (gpt's d_model and heads) is a combination's question: expand_sweep leaves out those
    // that do not.
    std::vector<std::pair<std::string, std::string>> firsts;
    for (const auto& p : schema->params)
      if (const toml::node* n = t.get(p.name))
        firsts.emplace_back(p.name, axis_values(origin, *n, p.name)[0]);
    for (const auto& p : schema->params) {
      const toml::node* n = t.get(p.name);
      if (!n) continue;
      SweepAxis axis{p.name, axis_values(origin, *n, p.name)};
      // A value listed twice (64 and "064" too: the same value as a config writes it) made
      // every config with it twice, a typo most likely for another value.
      std::vector<std::string> canonical;
      std::set<std::string> seen_values;
      for (const auto& v : axis.values) {  // validate every value now, with its line
        try {
          auto given = firsts;
          bool replaced = false;
          for (auto& [k, x] : given)
            if (k == p.name) x = v, replaced = true;
          if (!replaced) given.emplace_back(p.name, v);
          const Config c = make_config(schema->name, given, /*combine=*/false);
          canonical.push_back(c.has(p.name) ? c.get(p.name) : v);
        } catch (const UsageError& e) {
          fail(origin, n->source(), p.name, e.what());
        }
        if (!seen_values.insert(canonical.back()).second)
          fail(origin, n->source(), p.name,
               "value " + v + " is listed twice" +
                   (v == canonical.back() ? "" : " (" + v + " is " + canonical.back() + ")"));
      }
      grid.axes.push_back(std::move(axis));
    }
    for (const auto& [k, n] : t) {
      const std::string key(k.str());
      if (key != "family" && !schema->find(key))
        fail(origin, n.source(), key, "not a parameter of family '" + schema->name + "'");
    }
    s.grids.push_back(std::move(grid));
  }
  if (const toml::array* ex = root["exclude"].as_array()) {
    for (const auto& e : *ex) {
      std::map<std::string, std::vector<std::string>> rule;
      for (const auto& [k, n] : *e.as_table()) {
        const std::string key(k.str());
        bool known = key == "family";
        for (const auto& g : s.grids) known |= find_family_schema(g.family)->find(key) != nullptr;
        if (!known) fail(origin, n.source(), key, "not a parameter of any grid's family");
        rule[key] = axis_values(origin, n, key);
      }
      if (rule.empty()) fail(origin, e.source(), "exclude", "empty exclusion matches everything");
      s.excludes.push_back(std::move(rule));
    }
  }
  if (s.name.empty()) s.name = origin.substr(origin.find_last_of('/') + 1);
  return s;
}

SweepSpec load_sweep_file(const std::string& path) {
  if (is_directory(path)) throw UsageError("sweep file '" + path + "' is a directory, not a file");
  std::ifstream in(path);
  if (!in) throw UsageError("cannot open sweep file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_sweep(ss.str(), path);
}

std::vector<std::string> builtin_sweep_names() {
  std::vector<std::string> out;
  if (DIR* d = opendir(TB_SWEEP_DIR)) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".toml") == 0)
        out.push_back(n.substr(0, n.size() - 5));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

SweepSpec find_sweep(const std::string& name_or_path) {
  struct stat st {};
  if (name_or_path.find('/') != std::string::npos || stat(name_or_path.c_str(), &st) == 0)
    return load_sweep_file(name_or_path);
  const std::string file = std::string(TB_SWEEP_DIR) + "/" + name_or_path + ".toml";
  if (stat(file.c_str(), &st) == 0) {
    SweepSpec s = load_sweep_file(file);
    s.origin = "built-in " + name_or_path;
    return s;
  }
  std::string names;
  for (const auto& n : builtin_sweep_names()) names += (names.empty() ? "" : ", ") + n;
  throw UsageError("unknown sweep '" + name_or_path + "' (built-in: " + names +
                   ", or a .toml file)");
}

std::vector<Config> expand_sweep(const SweepSpec& s, uint64_t limit,
                                 std::vector<InvalidCell>* invalid) {
  uint64_t total = 0;
  for (const auto& g : s.grids) {
    const uint64_t n = g.size();
    total = (n == UINT64_MAX || total + n < total) ? UINT64_MAX : total + n;
  }
  if (total > limit)
    throw UsageError(fmt::format(
        "{}: the grid has {} configs, more than {}; narrow it or use --sample", s.origin,
        total == UINT64_MAX ? std::string("too many") : std::to_string(total), limit));
  std::vector<Config> out;
  std::vector<InvalidCell> left_out;
  // Grids may overlap (two [[grid]] tables that share configs): each config once, where it
  // first appears.
  std::set<std::string> seen_configs;
  for (const auto& g : s.grids) {
    std::vector<size_t> index(g.axes.size(), 0);
    for (;;) {
      std::vector<std::pair<std::string, std::string>> kv;
      for (size_t a = 0; a < g.axes.size(); ++a)
        kv.emplace_back(g.axes[a].name, g.axes[a].values[index[a]]);
      // An exclusion rule drops a combination whether or not its values go together.
      std::optional<Config> c;
      std::string why;
      try {
        c = make_config(g.family, kv);
      } catch (const UsageError& e) {
        why = e.what();
      }
      const Config seen = c ? *c : make_config(g.family, kv, /*combine=*/false);
      bool excluded = false;
      for (const auto& rule : s.excludes) {
        bool all = true;
        for (const auto& [key, values] : rule) {
          if (key == "family") {
            all &= std::find(values.begin(), values.end(), seen.family()) != values.end();
          } else {
            all &= seen.has(key) &&
                   std::find(values.begin(), values.end(), seen.get(key)) != values.end();
          }
        }
        excluded |= all;
      }
      if (!excluded && !c) left_out.push_back({seen.str(), why});
      if (!excluded && c && seen_configs.insert(c->str()).second) out.push_back(std::move(*c));
      size_t a = g.axes.size();
      while (a > 0 && ++index[a - 1] == g.axes[a - 1].values.size()) index[--a] = 0;
      if (a == 0) break;
    }
  }
  if (out.empty() && !left_out.empty())
    throw UsageError(fmt::format("{}: no combination of the grid's values is a config: {}",
                                 s.origin, left_out.front().reason));
  if (invalid) *invalid = std::move(left_out);
  return out;
}

Filter parse_filter(const std::string& text) {
  Filter f;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t at = item.find_first_of("<>=!");
    if (at == std::string::npos || at == 0)
      throw UsageError("--filter: expected key<op>value with op one of = != < <= > >=, got '" +
                       item + "'");
    size_t end = item.find_first_not_of("<>=!", at);
    std::string op = item.substr(at, end - at),
                value = end == std::string::npos ? "" : item.substr(end);
    if (op != "=" && op != "!=" && op != "<" && op != "<=" && op != ">" && op != ">=")
      throw UsageError("--filter: unknown operator '" + op + "' in '" + item + "'");
    if (value.empty()) throw UsageError("--filter: no value in '" + item + "'");
    f.conditions.push_back({item.substr(0, at), op, value});
  }
  return f;
}

void check_filter(const Filter& f, const SweepSpec& s) {
  for (const auto& cond : f.conditions) {
    const std::string item = printable(cond.key + cond.op + cond.value);
    const bool ordered = cond.op != "=" && cond.op != "!=";
    if (cond.key == "family") {
      bool named = false;
      for (const auto& g : s.grids) named |= g.family == cond.value;
      if (ordered || !named)
        throw UsageError("--filter: '" + item + "': family compares with = or != against a " +
                         "family of " + printable(s.origin));
      continue;
    }
    // A value the parameter cannot take would keep nothing, or everything, without a word:
    // refused where every grid family that has the parameter would refuse it.
    std::vector<const ParamSpec*> specs;
    for (const auto& g : s.grids)
      if (const ParamSpec* p = find_family_schema(g.family)->find(cond.key)) specs.push_back(p);
    if (specs.empty())
      throw UsageError("--filter: '" + printable(cond.key) +
                       "' is not a parameter of any family in " + printable(s.origin));
    char* end = nullptr;
    const double x = std::strtod(cond.value.c_str(), &end);
    const bool number = *end == '\0' && std::isfinite(x);  // nan would match every config
    const bool whole = number && x == std::floor(x);
    std::string why;
    bool takes = false;
    for (const ParamSpec* p : specs) {
      if (p->is_text()) {
        takes = true;  // any text may be meant
      } else if (p->is_choice()) {
        const bool known =
            std::find(p->choices.begin(), p->choices.end(), cond.value) != p->choices.end();
        takes |= !ordered && known;
        why = ordered ? cond.key + " is a word: only = and != compare it"
                      : fmt::format("{} is one of {}", cond.key, fmt::join(p->choices, ", "));
      } else {
        takes |= whole;
        why = cond.key + " takes a whole number";
      }
    }
    if (!takes) throw UsageError("--filter: '" + item + "': " + why);
  }
}

bool Filter::matches(const Config& c) const {
  for (const auto& cond : conditions) {
    std::string v;
    if (cond.key == "family")
      v = c.family();
    else if (c.has(cond.key))
      v = c.get(cond.key);
    else
      return false;  // a condition on a parameter the family does not have
    char* e1 = nullptr;
    char* e2 = nullptr;
    const double a = std::strtod(v.c_str(), &e1), b = std::strtod(cond.value.c_str(), &e2);
    const bool numeric = *e1 == '\0' && *e2 == '\0';
    const int cmp = numeric ? (a < b ? -1 : a > b ? 1 : 0) : v.compare(cond.value);
    const std::string& op = cond.op;
    const bool ok = op == "="    ? cmp == 0
                    : op == "!=" ? cmp != 0
                    : op == "<"  ? cmp < 0
                    : op == "<=" ? cmp <= 0
                    : op == ">"  ? cmp > 0
                                 : cmp >= 0;
    if (!ok) return false;
  }
  return true;
}

std::vector<Config> sample_configs(const std::vector<Config>& configs, const SweepSpec& s, size_t n,
                                   uint64_t seed, bool lhs) {
  if (n >= configs.size()) return configs;
  std::mt19937_64 rng(seed);
  std::vector<size_t> chosen;
  std::set<size_t> used;
  if (lhs) {
    // Latin hypercube over the axes' value indices: each axis is cut into n strata and
    // every stratum is used once; the config with those values is taken (if it was
    // excluded or already taken, a random unused one stands in).
    std::map<std::string, size_t> by_string;
    for (size_t i = 0; i < configs.size(); ++i) by_string[configs[i].str()] = i;
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::vector<size_t>> perms;
    for (const auto& g : s.grids)
      for (size_t a = 0; a < g.axes.size(); ++a) {
        std::vector<size_t> p(n);
        std::iota(p.begin(), p.end(), 0);
        std::shuffle(p.begin(), p.end(), rng);
        perms.push_back(p);
      }
    for (size_t i = 0; i < n; ++i) {
      const SweepGrid& g = s.grids[i % s.grids.size()];
      size_t offset = 0;
      for (size_t k = 0; k < i % s.grids.size(); ++k) offset += s.grids[k].axes.size();
      std::vector<std::pair<std::string, std::string>> kv;
      for (size_t a = 0; a < g.axes.size(); ++a) {
        const size_t k = g.axes[a].values.size();
        const size_t idx = std::min(k - 1, size_t((perms[offset + a][i] + u(rng)) / n * k));
        kv.emplace_back(g.axes[a].name, g.axes[a].values[idx]);
      }
      std::string text;
      try {
        text = make_config(g.family, kv).str();
      } catch (const UsageError&) {
        continue;  // values that do not go together: the sample fills up from the rest
      }
      auto it = by_string.find(text);
      if (it != by_string.end() && used.insert(it->second).second) chosen.push_back(it->second);
    }
  }
  std::vector<size_t> rest;
  for (size_t i = 0; i < configs.size(); ++i)
    if (!used.count(i)) rest.push_back(i);
  std::shuffle(rest.begin(), rest.end(), rng);
  for (size_t i = 0; chosen.size() < n && i < rest.size(); ++i) chosen.push_back(rest[i]);
  std::sort(chosen.begin(), chosen.end());
  std::vector<Config> out;
  for (size_t i : chosen) out.push_back(configs[i]);
  return out;
}

std::vector<Config> stratified_sample(const std::vector<Config>& configs, size_t n, uint64_t seed,
                                      const std::vector<std::string>& axes) {
  if (axes.empty()) throw UsageError("--stratify: name at least one hyperparameter");
  std::map<std::vector<std::string>, std::vector<size_t>> strata;
  for (size_t i = 0; i < configs.size(); ++i) {
    std::vector<std::string> key;
    for (const auto& a : axes) {
      if (!configs[i].has(a))
        throw UsageError("--stratify: '" + a + "' is not a parameter of " + configs[i].str());
      key.push_back(configs[i].get(a));
    }
    strata[key].push_back(i);
  }
  if (n >= configs.size()) return configs;
  std::mt19937_64 rng(seed);
  std::vector<std::vector<size_t>*> order;
  for (auto& [key, members] : strata) {
    std::shuffle(members.begin(), members.end(), rng);
    order.push_back(&members);
  }
  // Which cells get the extra config when n is not a multiple of the cells: random.
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<size_t> chosen;
  for (size_t round = 0; chosen.size() < n; ++round)
    for (auto* members : order)
      if (round < members->size() && chosen.size() < n) chosen.push_back((*members)[round]);
  std::sort(chosen.begin(), chosen.end());
  std::vector<Config> out;
  for (size_t i : chosen) out.push_back(configs[i]);
  return out;
}

std::pair<int, int> parse_shard(const std::string& text) {
  int i = 0, n = 0;
  char rest;
  if (std::sscanf(text.c_str(), "%d/%d%c", &i, &n, &rest) != 2 || n < 1 || i < 1 || i > n)
    throw UsageError("--shard: expected I/N with 1 <= I <= N, got '" + text + "'");
  return {i, n};
}

std::vector<Config> shard(const std::vector<Config>& configs, int i, int n) {
  std::vector<Config> out;
  for (size_t k = size_t(i - 1); k < configs.size(); k += size_t(n)) out.push_back(configs[k]);
  return out;
}

}  // namespace tb
