// Durable outputs: a rename makes a file appear atomically, but only an fsync of
// the file (and of its folder, for the rename itself) makes it survive a power
// loss or a killed node. Checkpoints and logs that a resumed run trusts need both.
#pragma once

#include <string>

namespace moelab {

// Flushes a file's or a folder's contents to disk; InputError naming it on failure.
void fsync_path(const std::string& path);
// Publishes a finished `temporary` file as `path`: fsyncs it, renames it and fsyncs
// the folder. InputError naming the paths on failure.
void commit_durably(const std::string& temporary, const std::string& path);
// Writes `contents` under a temporary name, fsyncs it, renames it onto `path` and
// fsyncs the folder, so a reader sees the old file or the whole new one.
void write_file_durably(const std::string& path, const std::string& contents);

}  // namespace moelab
