#include "analysis/tta.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "analysis/published.h"
#include "analysis/rounding_table.h"
#include "base/errors.h"
#include "cost/cost.h"
#include "cost/fashion_mnist.h"
#include "record/emulation.h"
#include "simulate/accelerator_model.h"
#include "spec/config.h"
#include "store/store.h"

namespace tb {

std::vector<StoredEmulation> load_emulations(const std::vector<std::string>& stores) {
  std::vector<StoredEmulation> out;
  for (const auto& path : stores) {
    auto store = Store::open_read_only(path);
    std::map<int64_t, std::string> names;
    for (const auto& p : store->platforms())
      names[p.at("id").get<int64_t>()] = p.at("name").get<std::string>();
    for (const auto& e : store->emulations())
      out.push_back({path, names[e.at("platform_id").get<int64_t>()], e.at("variant"),
                     e.at("seeds").get<std::vector<nlohmann::json>>()});
  }
  return out;
}

std::string TtaVariant::target_text() const {
  if (metric == "loss") return fmt::format("validation loss <= {} ({})", target, dataset);
  return fmt::format("test accuracy >= {}", target);
}

namespace {

bool is_fp32_baseline(const nlohmann::json& v) {
  if (v.value("unit", "") != "" || v.value("loss_scale", "none") != "none") return false;
  if (v.value("activation", "relu") != "relu") return false;
  for (const auto& [k, p] : v.at("points").items())
    if (p.value("format", "off") != "off" && p.value("format", "") != "fp32") return false;
  return true;
}

// The descriptor's training and evaluation settings that decide what an iteration count means
// (emulation/descriptor.cc). The iteration cap is not among them: it decides only whether a
// seed that needs more is "not reached".
std::string protocol_of(const nlohmann::json& v) {
  const auto text = [&](const char* k) {
    if (!v.contains(k)) return std::string("?");
    const auto& x = v.at(k);
    return x.is_number_float() ? fmt::format("{}", x.get<double>())
           : x.is_string()     ? x.get<std::string>()
                               : x.dump();
  };
  return fmt::format("batch {}, lr {}, momentum {}, evaluated every {} iterations on {} examples",
                     text("batch"), text("lr"), text("momentum"), text("eval_every"),
                     text("eval_examples"));
}

}  // namespace

TtaResult time_to_accuracy(const std::vector<StoredEmulation>& emulations,
                           const PlatformDescription& accel, const std::string& baseline,
                           const std::vector<std::string>& run_as_items) {
  TtaResult r;
  r.platform = accel.name;
  r.validation = sim::validation_phrase(accel.name);
  // Each --run-as item split where its left side names a variant (number or policy text).
  std::map<std::string, std::string> validation;  // per format: validation_phrase reads files
  std::set<std::string> keys;
  for (size_t i = 0; i < emulations.size(); ++i) {
    keys.insert(std::to_string(i + 1));
    keys.insert(emulations[i].variant.value("policy", ""));
  }
  // Each item's FORMAT must resolve on the accelerator: asked for by name, a format it cannot
  // run is a usage error, not an unsupported variant.
  std::map<std::string, std::string> run_as, item_of;
  for (const std::string& item : run_as_items) {
    bool found = false;
    for (size_t eq = item.find('='); eq != std::string::npos && !found; eq = item.find('=', eq + 1))
      if (eq + 1 < item.size() && keys.count(item.substr(0, eq))) {
        const std::string key = item.substr(0, eq), format = item.substr(eq + 1);
        if (run_as.count(key))
          throw UsageError(fmt::format("--run-as '{}': variant '{}' is already run as '{}'", item,
                                       key, run_as[key]));
        try {
          sim::resolve_format(accel, format);
        } catch (const UsageError& e) {
          throw UsageError(fmt::format("--run-as '{}': {}", item, e.what()));
        }
        run_as[key] = format;
        item_of[key] = item;
        found = true;
      }
    if (!found)
      throw UsageError(fmt::format(
          "--run-as '{}': expected VARIANT=FORMAT, VARIANT a stored variant's number (1..{}) "
          "or policy text",
          item, emulations.size()));
  }
  for (const auto& e : emulations) {
    TtaVariant v;
    v.source = &e;
    v.policy = e.variant.value("policy", "");
    v.model = e.variant.value("model", "");
    v.format = e.variant.value("format", "fp32");
    v.cost_config = e.variant.value("cost_config", "");
    v.target = e.variant.value("target", 0.0);
    v.metric = e.variant.value("metric", "accuracy");
    v.dataset = e.variant.value("dataset", "fashion-mnist");
    v.protocol = protocol_of(e.variant);
    std::vector<emu::SeedRun> runs;
    std::vector<std::vector<emu::ScalingSample>> scaling;
    for (const auto& s : e.seeds) {
      emu::SeedRun sr;
      const auto& it = s.at("iterations_to_target");
      if (it.is_number()) {
        sr.iterations = it.get<int64_t>();
        v.iterations.push_back(double(*sr.iterations));
      }
      runs.push_back(sr);
      if (s.contains("scaling")) scaling.push_back(scaling_from_json(s.at("scaling")));
    }
    v.rounding = emu::summarize_scaling(scaling);
    const emu::SeedSummary sum = emu::summarize_seeds(runs);
    v.seeds = sum.runs;
    v.reached = sum.reached;
    v.mean_iterations = sum.mean, v.stddev_iterations = sum.stddev;
    v.min_iterations = sum.min, v.max_iterations = sum.max;
    v.mlperf_iterations = sum.mlperf_mean;
    std::string model;
    int64_t batch = 0;
    StepCost cost;
    if (cost::parse_fashion_mnist_cost_config(v.cost_config, &model, &batch)) {
      cost = cost::fashion_mnist_cost(model, batch);
    } else {
      // A family config (`emulate --model fc:...`): its own cost description.
      std::optional<Config> c;
      try {
        c = parse_config(v.cost_config);
      } catch (const UsageError&) {
      }
      if (!c || !has_cost(c->family()))
        throw UsageError(
            fmt::format("{}: emulation '{}' names no network the cost model knows ('{}')", e.store,
                        v.policy, v.cost_config));
      cost = step_cost(*c);
    }
    // By number or by policy text (every variant with that text), not both.
    const std::string number = std::to_string(r.variants.size() + 1);
    if (run_as.count(number) && run_as.count(v.policy))
      throw UsageError(fmt::format("--run-as '{}' and '{}' name the same variant ({})",
                                   item_of[number], item_of[v.policy], number));
    for (const std::string& key : {number, v.policy}) {
      const auto it = run_as.find(key);
      if (it == run_as.end()) continue;
      v.emulated_format = v.format;
      v.format = it->second;
      break;
    }
    std::optional<sim::SimFormat> f;
    try {
      f = sim::resolve_format(accel, v.format);
    } catch (const UsageError& e) {
      v.unsupported = e.what();
      r.variants.push_back(std::move(v));
      continue;
    }
    v.format_note = f->note;
    auto [phrase, fresh] = validation.try_emplace(v.format);
    if (fresh) phrase->second = sim::validation_phrase(accel.name, v.format);
    v.validation = phrase->second;
    v.step_s = sim::simulate_step(accel, cost, 4, *f).step_s;
    if (v.all_reached()) {
      v.tta_s = v.mean_iterations * v.step_s;
      v.tta_min_s = v.min_iterations * v.step_s;
      v.tta_max_s = v.max_iterations * v.step_s;
      if (v.mlperf_iterations) v.tta_mlperf_s = *v.mlperf_iterations * v.step_s;
    }
    r.variants.push_back(std::move(v));
  }
  // The baseline of each (model, target).
  std::vector<size_t> bases;
  if (!baseline.empty()) {
    size_t chosen = r.variants.size();
    try {
      size_t used = 0;
      const long n = std::stol(baseline, &used);
      if (used == baseline.size() && n >= 1 && size_t(n) <= r.variants.size())
        chosen = size_t(n - 1);
    } catch (const std::exception&) {
    }
    for (size_t i = 0; chosen == r.variants.size() && i < r.variants.size(); ++i)
      if (r.variants[i].policy == baseline) chosen = i;
    if (chosen == r.variants.size())
      throw UsageError(
          fmt::format("--baseline '{}' matches no stored variant (give its number "
                      "or policy text; 1..{})",
                      baseline, r.variants.size()));
    bases.push_back(chosen);
  } else {
    for (size_t i = 0; i < r.variants.size(); ++i) {
      const auto& v = r.variants[i];
      if (!is_fp32_baseline(v.source->variant)) continue;
      const bool taken = std::any_of(bases.begin(), bases.end(), [&](size_t b) {
        return r.variants[b].model == v.model && r.variants[b].target == v.target &&
               r.variants[b].metric == v.metric && r.variants[b].protocol == v.protocol;
      });
      if (!taken) bases.push_back(i);
    }
  }
  // Whether a baseline of v's model, target and protocol exists.
  const auto own_base = [&](const TtaVariant& v) {
    return std::any_of(bases.begin(), bases.end(), [&](size_t b) {
      const auto& x = r.variants[b];
      return x.model == v.model && x.target == v.target && x.metric == v.metric &&
             x.protocol == v.protocol;
    });
  };
  for (size_t b : bases) {
    r.variants[b].baseline = true;
    const auto& base = r.variants[b];
    for (auto& v : r.variants) {
      if (v.model != base.model || v.target != base.target || v.metric != base.metric) continue;
      if (v.protocol != base.protocol) {
        // Counted every 30 iterations against every 10, or at another learning rate: the
        // ratio would measure the protocol. Said once, against the first such baseline.
        if (v.no_speedup.empty() && !own_base(v))
          v.no_speedup = fmt::format(
              "no speedup: trained or evaluated otherwise than baseline {} ({}; this: {})", b + 1,
              base.protocol, v.protocol);
        continue;
      }
      if (!v.tta_s || !base.tta_s) continue;
      v.speedup = *base.tta_s / *v.tta_s;
      if (&v == &base) continue;
      v.vs_baseline = compare_iterations(v.iterations, base.iterations);
      if (v.vs_baseline) {
        const double steps = base.step_s / v.step_s;
        v.speedup_lo = v.vs_baseline->ratio_lo * steps;
        v.speedup_hi = v.vs_baseline->ratio_hi * steps;
      }
    }
  }
  return r;
}

namespace {
nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}
}  // namespace

nlohmann::json to_json(const TtaResult& r) {
  nlohmann::json vs = nlohmann::json::array();
  for (const auto& v : r.variants) {
    nlohmann::json it = {{"seeds", v.seeds}, {"reached", v.reached}};
    if (v.all_reached()) {
      it["mean"] = v.mean_iterations;
      it["stddev"] = v.stddev_iterations;
      it["min"] = v.min_iterations;
      it["max"] = v.max_iterations;
      it["mlperf_mean"] = opt(v.mlperf_iterations);
    }
    vs.push_back(
        {{"policy", v.policy},
         {"model", v.model},
         {"target", v.target},
         {"metric", v.metric},
         {"dataset", v.dataset},
         {"format", v.format},
         {"emulated_format", v.emulated_format.empty() ? v.format : v.emulated_format},
         {"format_note", v.format_note},
         {"validation", v.validation},
         {"cost_config", v.cost_config},
         {"iterations", it},
         // The outcome in the field and vocabulary every result uses; whether the seeds
         // reached the target is a separate word, never folded into it.
         {"status", v.unsupported.empty() ? "ok" : "unsupported"},
         {"convergence", !v.unsupported.empty() ? nlohmann::json()
                         : v.all_reached()      ? nlohmann::json("reached")
                                                : nlohmann::json("not reached")},
         {"unsupported", v.unsupported},
         {"step_s", v.step_s},
         {"tta_s", opt(v.tta_s)},
         {"tta_mlperf_s", opt(v.tta_mlperf_s)},
         {"tta_min_s", opt(v.tta_min_s)},
         {"tta_max_s", opt(v.tta_max_s)},
         {"protocol", v.protocol},
         {"no_speedup", v.no_speedup},
         {"speedup_vs_baseline", opt(v.speedup)},
         {"speedup_ci95",
          v.speedup_lo ? nlohmann::json::array({*v.speedup_lo, *v.speedup_hi}) : nlohmann::json()},
         {"vs_baseline", v.vs_baseline
                             ? nlohmann::json{{"iterations_ratio", v.vs_baseline->ratio},
                                              {"iterations_ratio_ci95",
                                               {v.vs_baseline->ratio_lo, v.vs_baseline->ratio_hi}},
                                              {"t", v.vs_baseline->t},
                                              {"dof", v.vs_baseline->dof},
                                              {"p_more_iterations", v.vs_baseline->p_more},
                                              {"seeds_for_10pct", v.vs_baseline->seeds_for_10pct}}
                             : nlohmann::json()},
         {"rounding", to_json(v.rounding)},
         {"baseline", v.baseline},
         {"variant", v.source ? v.source->variant : nlohmann::json()}});
  }
  return {{"platform", r.platform}, {"validation", r.validation}, {"variants", vs}};
}

std::string format_tta(const TtaResult& r) {
  std::ostringstream o;
  o << fmt::format("time to accuracy on {}: emulated iterations x simulated step time\n{}\n",
                   r.platform, r.validation);
  // Each variant's protocol is printed where the variants differ in it.
  const bool protocols = std::any_of(r.variants.begin(), r.variants.end(), [&](const auto& v) {
    return v.protocol != r.variants.front().protocol;
  });
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    o << fmt::format("\n{}. {}{}\n   model {}, target {}, format {}{}: step {}\n", i + 1, v.policy,
                     v.baseline ? "  [baseline]" : "", v.model, v.target_text(), v.format,
                     v.emulated_format.empty()
                         ? ""
                         : fmt::format(" (run as; emulated in {})", v.emulated_format),
                     v.unsupported.empty() ? fmt::format("{:.4g} ms", v.step_s * 1e3) : "-");
    if (!v.format_note.empty()) o << "   note: " << v.format_note << "\n";
    if (protocols) o << "   protocol: " << v.protocol << "\n";
    if (!v.unsupported.empty()) {
      o << "   unsupported: " << v.unsupported << "\n";
      continue;
    }
    if (!v.all_reached()) {
      o << fmt::format("   not reached: {} of {} seeds reached the target\n", v.reached, v.seeds);
      continue;
    }
    o << fmt::format(
        "   iterations: mean {:.1f} (sd {:.1f}, {:.0f}..{:.0f}, {} seeds), MLPerf mean {}\n",
        v.mean_iterations, v.stddev_iterations, v.min_iterations, v.max_iterations, v.seeds,
        v.mlperf_iterations ? fmt::format("{:.1f}", *v.mlperf_iterations) : "- (< 3 seeds)");
    o << fmt::format(
        "   TTA: {:.4g} s (MLPerf {}, range {:.4g}..{:.4g} s){}\n", *v.tta_s,
        v.tta_mlperf_s ? fmt::format("{:.4g} s", *v.tta_mlperf_s) : "-", *v.tta_min_s, *v.tta_max_s,
        v.speedup ? fmt::format(", {:.2f}x the baseline's speed{} ({})", *v.speedup,
                                v.speedup_lo ? fmt::format(" (95% CI {:.2f}..{:.2f})",
                                                           *v.speedup_lo, *v.speedup_hi)
                                             : "",
                                v.validation.empty() ? r.validation : v.validation)
                  : "");
    if (!v.no_speedup.empty()) o << "   " << v.no_speedup << "\n";
    if (const auto& c = v.vs_baseline)
      o << fmt::format(
          "   vs baseline: {:.2f}x its iterations; one-sided t-test (more iterations) t = "
          "{:.2f}, p = {:.3g}{}; {} seeds each would resolve a 10% difference\n",
          1 / c->ratio, c->t, c->p_more, c->p_more < 0.05 ? " (more, at 5%)" : "",
          c->seeds_for_10pct);
    if (!v.rounding.empty()) o << format_rounding(v.rounding, "   ");
  }
  return o.str();
}

}  // namespace tb
