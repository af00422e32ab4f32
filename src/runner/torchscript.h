#pragma once
// The `mode=torchscript` stack: the workload's loss traced once into a TorchScript graph
// (parameters as graph inputs, so gradients reach them) and run by LibTorch's graph
// executor, which optimizes the graph for training after its profiling runs.
#include <memory>

#include "model/workload.h"

namespace tb {

// Wraps a built workload; `example` is the batch traced through (shapes are fixed by it).
std::unique_ptr<Workload> trace_workload(std::unique_ptr<Workload> eager, const Batch& example);

}  // namespace tb
