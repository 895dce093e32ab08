#include "util/test_hooks.h"

namespace moelab {
namespace {
TestHooks g_hooks;
}

const TestHooks& test_hooks() {
  return g_hooks;
}

void set_test_hooks(const TestHooks& hooks) {
  g_hooks = hooks;
}

}  // namespace moelab
