#include "data/atomic_file.h"

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

std::string temporary_path_for(const std::string& path) {
  const fs::path target(path);
  return (target.parent_path() / ("." + target.filename().string() + ".tmp")).string();
}

void commit_temporary(const std::string& temporary, const std::string& path) {
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    throw InputError("cannot rename " + temporary + " to " + path + ": " + error.message());
  }
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string temporary = temporary_path_for(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) throw InputError(temporary + ": cannot write file");
  }
  commit_temporary(temporary, path);
}

}  // namespace moelab
