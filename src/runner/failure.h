#pragma once
#include <string>

#include "record/result.h"

namespace tb {

// What a run that failed is recorded as: its status and a one-line reason. One mapping for
// `run`, `profile` and `memory`, so the same failure gets the same status under each.
struct Failure {
  Status status = Status::kCrashed;
  std::string error;
};

// Classifies the exception being handled; call it only inside a catch block. A UsageError
// is rethrown: bad input is refused, not recorded as a run's outcome. `during` ("during the
// run") completes the reason where the exception carries none (std::bad_alloc).
//   InvalidModel -> invalid; Unsupported, or a message saying "not implemented for" / "not
//   supported" -> unsupported; std::bad_alloc, or "can't allocate memory" / "out of memory"
//   -> oom; anything else -> crashed.
Failure current_failure(const std::string& during);

}  // namespace tb
