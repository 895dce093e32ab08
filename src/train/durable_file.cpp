#include "train/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/atomic_file.h"
#include "util/error.h"

namespace moelab {

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
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  fsync_path(folder.empty() ? "." : folder.string());
}

void write_file_durably(const std::string& path, const std::string& contents) {
  const std::string temporary = temporary_path_for(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) throw InputError(temporary + ": cannot write file");
  }
  commit_durably(temporary, path);
}

}  // namespace moelab
