#include "study/support_files.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "study/train_command.h"
#include "util/error.h"

namespace moelab {

std::string find_support_file(const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("MOELAB_HOME")) roots.emplace_back(home);
  for (fs::path dir = fs::path(current_executable()).parent_path(); dir.has_relative_path();
       dir = dir.parent_path()) {
    roots.push_back(dir);
  }
  std::string searched;
  for (const auto& root : roots) {
    const fs::path candidate = root / relative;
    if (fs::exists(candidate)) return candidate.lexically_normal().string();
    searched += (searched.empty() ? "" : ", ") + root.string();
  }
  throw InputError("cannot find " + relative + " (searched " + searched +
                   "); set MOELAB_HOME to the moelab source folder");
}

}  // namespace moelab
