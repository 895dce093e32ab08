// Outputs appear complete or not at all. A file is written under a temporary
// name in its own folder and renamed onto its path (rename is atomic within a
// file system). The durable variants also fsync the file and then its folder,
// so that checkpoints and logs a resumed run trusts survive a killed node or a
// power loss.
#pragma once

#include <string>

namespace moelab {

// "<dir>/.<name>.tmp" next to `path`.
std::string temporary_path_for(const std::string& path);
// Renames `temporary` onto `path`; InputError naming both on failure.
void commit_temporary(const std::string& temporary, const std::string& path);
// Writes `contents` to `path` through a temporary file, creating parent folders.
void write_file_atomically(const std::string& path, const std::string& contents);

// Flushes a file's or a folder's contents to disk; InputError naming it on failure.
void fsync_path(const std::string& path);
// Publishes a finished `temporary` file as `path`: fsyncs it, renames it and
// fsyncs the folder.
void commit_durably(const std::string& temporary, const std::string& path);
// write_file_atomically, made durable: a reader sees the old file or the whole
// new one, even after a crash.
void write_file_durably(const std::string& path, const std::string& contents);

// The file's contents; InputError naming `path` and `what` it is if unreadable.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace moelab
