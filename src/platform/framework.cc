#include "platform/framework.h"

namespace tb {
namespace {
FrameworkProbe& probe() {
  static FrameworkProbe p = nullptr;
  return p;
}
}  // namespace

void set_framework_probe(FrameworkProbe p) { probe() = p; }

FrameworkInfo framework_info() { return probe() ? probe()() : FrameworkInfo{}; }

}  // namespace tb
