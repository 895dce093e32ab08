#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

namespace {

// Writes `contents` to the temporary file of `path` and returns its name.
std::string write_temporary(const std::string& path, const std::string& contents) {
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string temporary = temporary_path_for(path);
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) throw InputError(temporary + ": cannot write file (" + std::strerror(errno) + ")");
  return temporary;
}

}  // namespace

std::string temporary_path_for(const std::string& path) {
  const fs::path target(path);
  return (target.parent_path() / ("." + target.filename().string() + ".tmp")).string();
}

void commit_temporary(const std::string& temporary, const std::string& path) {
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw InputError("cannot rename " + temporary + " to " + path + ": " + error.message());
  }
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  commit_temporary(write_temporary(path, contents), path);
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open for fsync: " + std::strerror(errno));
  const int result = ::fsync(fd);
  const int fsync_errno = errno;
  ::close(fd);
  if (result != 0) throw InputError(path + ": fsync failed: " + std::strerror(fsync_errno));
}

void commit_durably(const std::string& temporary, const std::string& path) {
  fsync_path(temporary);
  commit_temporary(temporary, path);
  const fs::path folder = fs::path(path).parent_path();
  fsync_path(folder.empty() ? "." : folder.string());
}

void write_file_durably(const std::string& path, const std::string& contents) {
  commit_durably(write_temporary(path, contents), path);
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace moelab
