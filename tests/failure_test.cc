// One mapping from what a failed run threw to its recorded status, for run, profile and
// memory alike (they once disagreed: memory recorded "not implemented" as crashed).
#include "runner/failure.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <functional>
#include <new>

#include "base/errors.h"

namespace tb {
namespace {

Failure failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (...) {
    return current_failure("during the test");
  }
  ADD_FAILURE() << "nothing was thrown";
  return {};
}

TEST(Failure, EveryKindOfExceptionGetsOneStatusAndOneLine) {
  auto c10_error = [](const std::string& m) { return [m] { TORCH_CHECK(false, m); }; };
  struct Case {
    std::function<void()> thrown;
    Status status;
    std::string error_start;
  };
  const std::vector<Case> cases = {
      {[] { throw InvalidModel("no such file\nsecond line"); }, Status::kInvalid, "no such file"},
      {[] { throw Unsupported("activation points"); }, Status::kUnsupported, "activation points"},
      {[] { throw std::bad_alloc(); }, Status::kOom, "std::bad_alloc during the test"},
      {c10_error("\"addmm_impl_cpu_\" not implemented for 'Half'"), Status::kUnsupported,
       "\"addmm_impl_cpu_\" not implemented"},
      {c10_error("DefaultCPUAllocator: can't allocate memory: you tried 1 TB"), Status::kOom,
       "DefaultCPUAllocator"},
      {c10_error("shape mismatch"), Status::kCrashed, "shape mismatch"},
      {[] { throw std::runtime_error("CUDA out of memory. Tried\nmore"); }, Status::kOom,
       "CUDA out"},
      {[] { throw std::runtime_error("bad state"); }, Status::kCrashed, "bad state"},
      {[] { throw 42; }, Status::kCrashed, "an exception that is not"},
  };
  for (const auto& c : cases) {
    const Failure f = failure_of(c.thrown);
    EXPECT_EQ(to_string(f.status), to_string(c.status)) << f.error;
    EXPECT_EQ(f.error.rfind(c.error_start, 0), 0u) << f.error;
    EXPECT_EQ(f.error.find('\n'), std::string::npos) << f.error;
  }
  // Bad input is refused, not recorded.
  EXPECT_THROW(failure_of([] { throw UsageError("nodes=0"); }), UsageError);
}

}  // namespace
}  // namespace tb
