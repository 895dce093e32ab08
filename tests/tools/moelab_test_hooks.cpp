// The moelab binary with test hooks (util/test_hooks.h), for the tests that
// inject faults into real runs: options --hook-NAME=VALUE before the command,
// then moelab's own command line.
//   moelab_test_hooks --hook-nonfinite-step=3 train run.toml ...
//   --hook-nonfinite-step=N             step N's loss is NaN
//   --hook-slow-checkpoint=R:S          rank R's checkpoint writes take S s longer
//   --hook-slow-rank=R:MS               rank R works MS ms longer every step
//   --hook-bf16-speedup=R:X             rank R's CPU has native bf16 matmuls, X times fp32's
//                                       (repeatable, a rank each)
// Built with the tests only: the moelab binary has no way to turn them on.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/run_cli.h"
#include "util/test_hooks.h"

namespace {

bool take_hook(const std::string& arg, moelab::TestHooks& hooks) {
  const auto value = [&](const std::string& name) -> const char* {
    const std::string prefix = "--hook-" + name + "=";
    return arg.rfind(prefix, 0) == 0 ? arg.c_str() + prefix.size() : nullptr;
  };
  if (const char* v = value("nonfinite-step")) {
    hooks.nonfinite_step = std::atoll(v);
  } else if (const char* v = value("slow-checkpoint")) {
    if (std::sscanf(v, "%d:%lf", &hooks.slow_checkpoint_rank, &hooks.slow_checkpoint_s) != 2)
      return false;
  } else if (const char* v = value("slow-rank")) {
    if (std::sscanf(v, "%d:%lf", &hooks.slow_rank, &hooks.slow_rank_ms) != 2) return false;
  } else if (const char* v = value("bf16-speedup")) {
    int rank = 0;
    double speedup = 0;
    if (std::sscanf(v, "%d:%lf", &rank, &speedup) != 2) return false;
    hooks.bf16_speedup[rank] = speedup;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  moelab::TestHooks hooks;
  std::vector<char*> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--hook-", 0) == 0 && !take_hook(arg, hooks)) {
      std::fprintf(stderr, "moelab_test_hooks: unknown or malformed hook %s\n", argv[i]);
      return 2;
    }
    if (arg.rfind("--hook-", 0) != 0) args.push_back(argv[i]);
  }
  moelab::set_test_hooks(hooks);
  args.push_back(nullptr);
  return moelab::run_cli(int(args.size()) - 1, args.data());
}
