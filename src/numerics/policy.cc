#include "numerics/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "base/errors.h"
#include "numerics/format.h"
#include "numerics/mad.h"
#include "numerics/scaling.h"

namespace tb::num {

namespace {

struct Recipe {
  const char* name;
  std::array<const char*, 6> points;
  const char* loss_scale;
};

// Autocast runs matrix products on half inputs and keeps fp32 masters and optimizer state;
// fp16 needs a dynamic loss scale (its range), bf16 does not. TF32 rounds only what tensor
// cores read.
const std::array<Recipe, 3> kRecipes = {{
    {"amp-fp16", {"fp16", "fp16", "fp16", "fp16", "off", "off"}, "dynamic"},
    {"amp-bf16", {"bf16", "bf16", "bf16", "bf16", "off", "off"}, "none"},
    {"tf32", {"tf32", "tf32", "tf32", "off", "off", "off"}, "none"},
}};

const Recipe* find_recipe(const std::string& name) {
  for (const auto& r : kRecipes)
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace

std::string NumericsPolicy::recipe() const {
  for (const auto& r : kRecipes) {
    bool same = true;
    for (size_t i = 0; i < points.size(); ++i) same = same && points[i] == r.points[i];
    if (same) return r.name;
  }
  return "";
}

namespace {

// Checks one point's text the way emulation will read it (QuantPoint::parse).
void check_point(const std::string& text, const std::string& whole) {
  if (text == "off") return;
  if (text.rfind("ext:", 0) == 0) {
    if (text.size() == 4) throw UsageError("numerics '" + whole + "': ext: needs a library path");
    return;
  }
  const std::string full = point_from_config(text);
  const auto at = full.find('@');
  const std::string p = full.substr(0, at);
  const auto slash = p.rfind('/');
  try {
    const Format f = parse_format(p.substr(0, slash));
    if (slash != std::string::npos) parse_rounding(p.substr(slash + 1));
    if (at != std::string::npos) parse_scaling(full.substr(at + 1), f, p);
  } catch (const UsageError& e) {
    throw UsageError("numerics '" + whole + "': " + e.what());
  }
}

}  // namespace

std::string point_from_config(const std::string& point) {
  std::string s = point;
  for (char& c : s)
    if (c == ';') c = ',';
  return s;
}

std::string point_to_config(const std::string& point) {
  std::string s = point;
  for (char& c : s)
    if (c == ',') c = ';';
  return s;
}

LossScale parse_loss_scale(const std::string& text) {
  LossScale s;
  auto number = [&](const std::string& v) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(d > 0) || !std::isfinite(d))
      throw UsageError("loss scale '" + text + "': expected none, static:S or dynamic[:S0]");
    return d;
  };
  if (text == "none") return s;
  if (text.rfind("static:", 0) == 0) {
    s.scale = number(text.substr(7));
  } else if (text == "dynamic" || text.rfind("dynamic:", 0) == 0) {
    s.dynamic = true;
    s.scale = text == "dynamic" ? 65536.0 : number(text.substr(8));
  } else {
    number("");
  }
  return s;
}

bool NumericsPolicy::is_fp32() const {
  for (const auto& p : points)
    if (p != "off") return false;
  for (const auto& [layer, ps] : layers)
    for (const auto& p : ps)
      if (!p.empty() && p != "off") return false;
  return loss_scale == "none" && activation == "relu" && unit.empty() && rht.empty();
}

Rht parse_rht(const std::string& text) {
  Rht r;
  const auto colon = text.find(':');
  const std::string n = text.substr(0, colon),
                    seed = colon == std::string::npos ? "" : text.substr(colon + 1);
  auto digits = [](const std::string& v, size_t max) {
    return !v.empty() && v.size() <= max && v.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(n, 3) || std::stoi(n) < 2 || std::stoi(n) > 256 ||
      (std::stoi(n) & (std::stoi(n) - 1)))
    throw UsageError("rht size '" + n + "' (expected a power of two, 2-256)");
  if (colon != std::string::npos && !digits(seed, 18))
    throw UsageError("rht seed '" + seed + "' (expected a non-negative integer)");
  r.size = std::stoi(n);
  if (!seed.empty()) r.seed = std::stoull(seed);
  return r;
}

std::string NumericsPolicy::compute_format() const {
  if (const std::string r = recipe(); !r.empty()) return r;
  std::string widest, scaling;
  double bits = 0;
  for (size_t i = 0; i < 3; ++i) {
    const std::string& p = points[i];
    if (p == "off" || p.rfind("ext:", 0) == 0) return "";
    const auto at = p.find('@');
    const std::string base = p.substr(0, at);
    const std::string text = point_from_config(base.substr(0, base.rfind('/')));
    const double b = parse_format(text).bits_per_element();
    // A scaling recipe comes along (the widest point's, else the first one's): simulate
    // charges its passes.
    const std::string suffix = at == std::string::npos ? "" : p.substr(at);
    if (b > bits) {
      bits = b, widest = text;
      if (!suffix.empty()) scaling = suffix;
    } else if (scaling.empty()) {
      scaling = suffix;
    }
  }
  return widest + scaling;
}

std::string NumericsPolicy::str() const {
  if (is_fp32()) return "fp32";
  bool uniform = points[0] != "off";
  for (const auto& p : points) uniform = uniform && p == points[0];
  std::string s;
  const Recipe* r = find_recipe(recipe());
  if (r) {
    s = r->name;
  } else if (uniform) {
    s = points[0];
  } else {
    for (size_t i = 0; i < points.size(); ++i)
      if (points[i] != "off") s += (s.empty() ? "" : "+") + std::string(kKeys[i]) + ":" + points[i];
  }
  for (const auto& [layer, ps] : layers)
    for (size_t i = 0; i < ps.size(); ++i)
      if (!ps[i].empty())
        s += (s.empty() ? "" : "+") + std::string(kKeys[i]) + "." + std::to_string(layer) + ":" +
             ps[i];
  // A recipe brings its own loss scale; only a different one is written.
  if (loss_scale != (r ? r->loss_scale : "none"))
    s += (s.empty() ? "" : "+") + std::string("ls:") + loss_scale;
  if (activation != "relu") s += (s.empty() ? "" : "+") + std::string("act:") + activation;
  if (!unit.empty()) s += (s.empty() ? "" : "+") + std::string("unit:") + unit;
  if (!rht.empty()) s += (s.empty() ? "" : "+") + std::string("rht:") + rht;
  return s;
}

NumericsPolicy parse_numerics(const std::string& text) {
  NumericsPolicy p;
  if (text == "fp32") return p;
  if (text.empty()) throw UsageError("numerics '': expected fp32 or ITEM[+ITEM...]");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t plus = text.find('+', start);
    const std::string item =
        text.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    start = plus == std::string::npos ? text.size() + 1 : plus + 1;
    if (item.empty()) throw UsageError("numerics '" + text + "': empty item");
    const auto colon = item.find(':');
    std::string key = colon == std::string::npos ? "" : item.substr(0, colon);
    int layer = -1;
    const auto dot = key.find('.');
    if (dot != std::string::npos && dot > 0 && dot <= 4) {  // the longest key: unit
      const std::string n = key.substr(dot + 1);
      if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("numerics '" + text + "': layer '" + n + "' in '" + item +
                         "' (expected KEY.N with N a layer number)");
      layer = std::stoi(n);
      key = key.substr(0, dot);
    }
    const std::string value = item.substr(colon + 1);
    if (key == "ls" && layer >= 0)
      throw UsageError("numerics '" + text + "': the loss scale is global, not per layer");
    if ((key == "act" || key == "unit" || key == "rht") && layer >= 0)
      throw UsageError("numerics '" + text + "': '" + key + "' is global, not per layer");
    if (const Recipe* r = colon == std::string::npos ? find_recipe(item) : nullptr) {
      for (size_t i = 0; i < p.points.size(); ++i) p.points[i] = r->points[i];
      p.loss_scale = r->loss_scale;
      continue;
    }
    if (key == "ls") {
      parse_loss_scale(value);
      p.loss_scale = value;
      continue;
    }
    if (key == "act") {
      static const char* kNames[] = {"relu", "tanh", "sigmoid", "tanh-pwl", "sigmoid-pwl"};
      const bool known = std::find(std::begin(kNames), std::end(kNames), value) != std::end(kNames);
      if (!known && (value.rfind("ext:", 0) != 0 || value.size() == 4))
        throw UsageError("numerics '" + text + "': activation '" + value +
                         "' (expected relu, tanh, sigmoid, tanh-pwl, sigmoid-pwl or ext:PATH)");
      p.activation = value;
      continue;
    }
    if (key == "rht") {
      try {
        parse_rht(value);
      } catch (const UsageError& e) {
        throw UsageError("numerics '" + text + "': " + e.what());
      }
      p.rht = value;
      continue;
    }
    if (key == "unit") {
      if (value.rfind("ext:", 0) == 0) {
        if (value.size() == 4)
          throw UsageError("numerics '" + text + "': unit 'ext:' needs a library path");
      } else {
        try {
          parse_mad(point_from_config(value));
        } catch (const UsageError& e) {
          throw UsageError("numerics '" + text + "': " + e.what());
        }
      }
      p.unit = value;
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < NumericsPolicy::kKeys.size(); ++i) {
      if (key == NumericsPolicy::kKeys[i]) {
        check_point(value, text);
        if (layer >= 0)
          p.layers[layer][i] = value;
        else
          p.points[i] = value;
        found = true;
      }
    }
    if (found) continue;
    if (layer >= 0)
      throw UsageError("numerics '" + text + "': '" + key + "' in '" + item +
                       "' (per-layer keys: w, a, e, g, o, m)");
    // No known key: the whole item is a point for all six places (`e4m3`, `fixed:w=8;f=4`).
    // A KEY: that is no point key (`x:e5m2`) then reads as an unknown format kind: name both.
    try {
      check_point(item, text);
    } catch (const UsageError& e) {
      static const std::set<std::string> kKinds = {"fp", "fixed", "bfp", "mx", "nvfp4"};
      if (colon == std::string::npos || kKinds.count(key)) throw;
      throw UsageError("numerics '" + text + "': '" + key + "' in '" + item +
                       "' is neither a point key (w, a, e, g, o, m, ls, act, unit, rht, or KEY.N "
                       "per layer) nor a format kind (fp, fixed, bfp, mx, nvfp4)");
    }
    p.points.fill(item);
  }
  if (p.is_fp32()) return NumericsPolicy{};  // `w.0:off` and the like: nothing is rounded
  return p;
}

}  // namespace tb::num
