// The moelab binary (cli/run_cli.h).
#include "cli/run_cli.h"

int main(int argc, char** argv) {
  return moelab::run_cli(argc, argv);
}
