// moelab: one binary, one subcommand per job. Exit codes: 0 ok, 2 bad usage,
// config or input, 1 internal failure, 3 stopped on a signal with a checkpoint
// saved (requeue and resume). Under mpirun a failure on any rank ends
// every rank, so no rank is left waiting in a collective.
#pragma once

namespace moelab {

// The whole command line of `moelab`: what main() runs, and what the tests'
// entry point with test hooks runs (tests/tools/moelab_test_hooks.cpp).
int run_cli(int argc, char** argv);

}  // namespace moelab
