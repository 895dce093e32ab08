// xxHash64 checksums of files and byte strings, written as 16 hex digits in
// shards and manifests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moelab {

uint64_t xxhash64_bytes(std::string_view bytes);
// Streams the file; InputError naming it if it cannot be read.
uint64_t xxhash64_file(const std::string& path);
std::string checksum_hex(uint64_t checksum);

}  // namespace moelab
