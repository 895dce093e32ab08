#include "study/train_command.h"

#include <unistd.h>

#include <filesystem>

namespace moelab {

std::vector<std::string> train_command(const PlannedRun& run, int64_t ranks,
                                       const std::string& binary) {
  std::vector<std::string> words;
  if (ranks > 1) {
    words = {"mpirun", "-np", std::to_string(ranks), "--oversubscribe"};
    // OpenMPI refuses to start as root without this flag (containers run as root).
    if (geteuid() == 0) words.push_back("--allow-run-as-root");
    words.insert(words.end(), {"-x", "OMP_NUM_THREADS"});
  }
  words.insert(words.end(), {binary, "train", run.config, "--resume", "auto"});
  return words;
}

std::vector<std::string> start_command(const PlannedRun& run, const std::string& binary) {
  if (run.start_args.empty()) return {};
  std::vector<std::string> words = {binary};
  words.insert(words.end(), run.start_args.begin(), run.start_args.end());
  return words;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
          std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + shell_quote(w);
  return line;
}

std::string current_executable() {
  return std::filesystem::read_symlink("/proc/self/exe");
}

}  // namespace moelab
