#include "train/stop_signal.h"

#include <csignal>

namespace moelab {
namespace {

volatile std::sig_atomic_t g_received = 0;

void on_stop_signal(int signal) {
  g_received = signal;
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Restart interrupted system calls: the flag is read between steps.
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  // The default action comes back once this handler has run: the next
  // Ctrl-C ends the process.
  action.sa_flags |= SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

int StopSignals::received() {
  return g_received;
}

}  // namespace moelab
