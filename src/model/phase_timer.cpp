#include "model/phase_timer.h"

#include <array>

namespace moelab {
namespace {

constexpr size_t kNumPhases = static_cast<size_t>(Phase::kCount);
bool g_enabled = false;
std::array<double, kNumPhases> g_seconds{};

}  // namespace

const char* phase_name(Phase phase) {
  static const char* names[kNumPhases] = {"embedding", "norm",     "attention", "dense_ffn",
                                          "route",     "dispatch", "experts",   "combine",
                                          "head",      "permute",  "exchange",  "unpermute"};
  return names[static_cast<size_t>(phase)];
}

void PhaseTimer::enable(bool on) {
  g_enabled = on;
}
bool PhaseTimer::enabled() {
  return g_enabled;
}
void PhaseTimer::reset() {
  g_seconds.fill(0.0);
}
double PhaseTimer::seconds(Phase phase) {
  return g_seconds[static_cast<size_t>(phase)];
}
void PhaseTimer::add(Phase phase, double seconds) {
  g_seconds[static_cast<size_t>(phase)] += seconds;
}

PhaseScope::PhaseScope(Phase phase) : range_(phase_name(phase)), phase_(phase) {
  if (g_enabled) watch_.emplace();
}

PhaseScope::~PhaseScope() {
  if (watch_) PhaseTimer::add(phase_, watch_->seconds());
}

}  // namespace moelab
