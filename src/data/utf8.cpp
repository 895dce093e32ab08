#include "data/utf8.h"

#include <cstdint>

#include "util/error.h"

namespace moelab {

namespace {

bool is_continuation(uint8_t byte) {
  return (byte & 0xC0) == 0x80;
}

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t min_code = 0;
  uint32_t code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min_code = 0x80, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min_code = 0x800, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min_code = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if (!is_continuation(byte(k))) return 0;
    code = (code << 6) | (byte(k) & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  if (code < min_code || surrogate || code > 0x10FFFF) return 0;
  return length;
}

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

void require_valid_utf8(std::string_view text, const std::string& origin) {
  size_t bad = 0;
  if (!is_valid_utf8(text, &bad)) {
    throw InputError(origin + ": text to encode is not valid UTF-8 at byte " + std::to_string(bad));
  }
}

}  // namespace moelab
