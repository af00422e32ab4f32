#pragma once
// One forward pass (Workload::loss) of a config's workload under LibTorch's profiler, for
// the tests that check a cost description against the profiler's own FLOP counts.
#include <torch/csrc/autograd/profiler_kineto.h>

#include <map>
#include <string>

#include "model/workload.h"

namespace tb::testing {

struct ForwardProfile {
  // aten::mm, addmm, bmm and conv2d as LibTorch counts them (2 x MACs, bias adds left out):
  // what a cost description's fwd_matmul_flops must match.
  double matmul = 0;
  std::map<std::string, int> calls;  // per operator name
};

inline ForwardProfile profile_forward(const Config& c) {
  using namespace torch::autograd::profiler;
  auto w = build_workload(c);
  w->module().train();
  const Batch batch = w->make_batch(torch::kCPU, torch::kFloat32, 1);
  enableProfiler(ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true,
                                /*profile_memory=*/false, /*with_stack=*/false,
                                /*with_flops=*/true, /*with_modules=*/false),
                 {torch::profiler::impl::ActivityType::CPU});
  w->loss(batch);
  auto result = disableProfiler();
  ForwardProfile p;
  for (const auto& e : result->events()) {
    const std::string n = e.name();
    ++p.calls[n];
    if (n == "aten::mm" || n == "aten::addmm" || n == "aten::bmm" || n == "aten::conv2d")
      p.matmul += double(e.flops());
  }
  return p;
}

}  // namespace tb::testing
