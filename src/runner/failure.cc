#include "runner/failure.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>

#include "base/errors.h"

namespace tb {
namespace {

Status from_message(const std::string& m) {
  if (m.find("not implemented for") != std::string::npos ||
      m.find("not supported") != std::string::npos || m.find("Unsupported") != std::string::npos)
    return Status::kUnsupported;
  if (m.find("can't allocate memory") != std::string::npos ||
      m.find("out of memory") != std::string::npos || m.find("std::bad_alloc") != std::string::npos)
    return Status::kOom;
  return Status::kCrashed;
}

}  // namespace

Failure current_failure(const std::string& during) {
  try {
    throw;
  } catch (const UsageError&) {
    throw;
  } catch (const InvalidModel& e) {
    return {Status::kInvalid, first_line(e.what())};
  } catch (const Unsupported& e) {
    return {Status::kUnsupported, first_line(e.what())};
  } catch (const std::bad_alloc&) {
    return {Status::kOom, "std::bad_alloc " + during};
  } catch (const c10::Error& e) {
    const std::string m = first_line(e.what_without_backtrace());
    return {from_message(m), m};
  } catch (const std::exception& e) {
    const std::string m = first_line(e.what());
    return {from_message(m), m};
  } catch (...) {
    return {Status::kCrashed, "an exception that is not a std::exception " + during};
  }
}

}  // namespace tb
