#pragma once
// `emulate --model CONFIG`: a generated family trained to accuracy on Fashion-MNIST with the
// emulated formats, so iterations-to-accuracy (and, through its cost description, time to
// accuracy) is known for any fc or cnn shape, not only emulate's two built-in networks.
#include "emulation/emulate.h"
#include "emulation/fashion_mnist.h"
#include "spec/config.h"

namespace tb::emu {

// True for a family config (`fc:...`), false for the built-in `mlp` and `cnn`.
bool is_family_model(const std::string& model);

// What every task needs of a config it trains (fp32 on the CPU, one worker, numerics=fp32: the
// formats come from the Policy), then `batch` and `optimizer` set on it. Throws UsageError
// naming the value that does not fit `task`.
void fit_for_emulation(Config& c, const std::string& model, const std::string& task, int64_t batch,
                       const std::string& optimizer);

// The config as trained: `fc` with input=784 and output=10, or `cnn` with image=28 and
// output=10 (the grey image repeated on its three channels); batch from `batch`, optimizer
// `momentum` (SGD with momentum, as emulate trains, at emulate's --lr), fp32 on the CPU, one
// worker, numerics=fp32 (the formats come from the Policy). Throws UsageError naming the value
// that does not fit.
Config fashion_mnist_family_config(const std::string& model, int64_t batch);

// One seed's run; the Policy's points apply as numerics= would (numerics_workload.h).
SeedRun train_family(const EmulationOptions& o, const Policy& p, const Dataset& train,
                     const Dataset& test, uint64_t seed, const Progress& progress);

}  // namespace tb::emu
