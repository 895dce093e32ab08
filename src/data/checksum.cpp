#include "data/checksum.h"

#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "util/error.h"

namespace moelab {

uint64_t xxhash64_bytes(std::string_view bytes) {
  return XXH64(bytes.data(), bytes.size(), 0);
}

uint64_t xxhash64_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file for checksumming");
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    XXH64_update(state.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw InputError(path + ": read error while checksumming");
  return XXH64_digest(state.get());
}

std::string checksum_hex(uint64_t checksum) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(checksum));
  return text;
}

}  // namespace moelab
