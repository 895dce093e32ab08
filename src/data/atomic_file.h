// Outputs appear complete or not at all: written under a temporary name in the
// same folder, then renamed (rename is atomic within one file system).
#pragma once

#include <string>

namespace moelab {

// "<dir>/.<name>.tmp" next to `path`.
std::string temporary_path_for(const std::string& path);
// Renames `temporary` onto `path`; InputError naming both on failure.
void commit_temporary(const std::string& temporary, const std::string& path);
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace moelab
