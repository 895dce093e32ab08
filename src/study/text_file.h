// Whole-file text reads and atomic writes for study outputs. (moelab_data has
// its own atomic writer, but the study library may not depend on data/.)
#pragma once

#include <string>

namespace moelab {

// The file's contents; InputError naming `path` and `what` it is if unreadable.
std::string read_text_file(const std::string& path, const std::string& what);

// Writes `<path>.tmp.<pid>` and renames it onto `path`, creating parent folders,
// so a reader never sees a half-written file.
void write_text_atomically(const std::string& path, const std::string& contents);

}  // namespace moelab
