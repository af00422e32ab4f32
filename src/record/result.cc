#include "record/result.h"

#include <stdexcept>

namespace tb {

std::string to_string(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kOomPredicted:
      return "oom-predicted";
    case Status::kOom:
      return "oom";
    case Status::kTimeout:
      return "timeout";
    case Status::kCrashed:
      return "crashed";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kInvalid:
      return "invalid";
  }
  return "invalid";
}

Status status_from_string(const std::string& s) {
  for (Status v : {Status::kOk, Status::kOomPredicted, Status::kOom, Status::kTimeout,
                   Status::kCrashed, Status::kUnsupported, Status::kInvalid})
    if (to_string(v) == s) return v;
  throw std::invalid_argument("unknown status '" + s + "'");
}

}  // namespace tb
