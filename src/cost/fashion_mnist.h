#pragma once
// Cost of the emulation phase's two Fashion-MNIST models (emulation/emulate.cc), so that a
// variant's iterations-to-accuracy can be multiplied by a simulated step time.
#include <string>

#include "cost/cost.h"

namespace tb::cost {

// `model`: mlp (784-256-128-10) or cnn (two 5x5 convolutions of 8 and 16 filters, each with
// the activation and 2x2 max-pooling, then a linear layer); SGD with momentum, float32.
// Throws UsageError for another model.
StepCost fashion_mnist_cost(const std::string& model, int64_t batch);

// The text naming it in stored emulation results: "fashion-mnist-mlp:batch=64".
std::string fashion_mnist_cost_config(const std::string& model, int64_t batch);
// Parses that text back; false when it is not one.
bool parse_fashion_mnist_cost_config(const std::string& text, std::string* model, int64_t* batch);

}  // namespace tb::cost
