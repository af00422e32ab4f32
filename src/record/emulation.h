#pragma once
// An emulation result as the results store and `trainbench emulate --json` keep it: the
// variant descriptor (what was emulated) and one object per seed.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "emulation/emulate.h"

namespace tb {

// The format an accelerator running this variant computes and moves data in: the widest
// of the points feeding the matrix multiplies (weights, activations, errors; an unset point
// is fp32), or the MAD unit's product format when no point is set. Extension formats have
// no known width and count as fp32.
std::string compute_format(const emu::Policy& p);

// model, batch, lr, momentum, target, evaluation, budget, the format and rounding at each
// point, loss scaling, unit, activation, the policy text, the compute format and the cost
// model's name for the emulated network ("fashion-mnist-mlp:batch=64").
nlohmann::json variant_descriptor(const emu::EmulationOptions& o, const emu::Policy& p);
nlohmann::json to_json(const emu::SeedRun& r);
std::vector<nlohmann::json> seeds_json(const emu::EmulationResult& r);

}  // namespace tb
