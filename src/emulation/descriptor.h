#pragma once
// What an emulation variant is, as results keep it: the widest format it computes in and the
// descriptor the store files it under.
#include <nlohmann/json.hpp>
#include <string>

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
}  // namespace tb
