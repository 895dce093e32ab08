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

char32_t next_code_point(std::string_view text, size_t* at) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[*at + k]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    *at += 1;
    return lead;
  }
  if (lead < 0xE0) {
    const char32_t code = char32_t(lead & 0x1F) << 6 | (byte(1) & 0x3F);
    *at += 2;
    return code;
  }
  if (lead < 0xF0) {
    const char32_t code =
        char32_t(lead & 0x0F) << 12 | char32_t(byte(1) & 0x3F) << 6 | (byte(2) & 0x3F);
    *at += 3;
    return code;
  }
  const char32_t code = char32_t(lead & 0x07) << 18 | char32_t(byte(1) & 0x3F) << 12 |
                        char32_t(byte(2) & 0x3F) << 6 | (byte(3) & 0x3F);
  *at += 4;
  return code;
}

void append_utf8(char32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out += char(code_point);
  } else if (code_point < 0x800) {
    out += char(0xC0 | code_point >> 6);
    out += char(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += char(0xE0 | code_point >> 12);
    out += char(0x80 | (code_point >> 6 & 0x3F));
    out += char(0x80 | (code_point & 0x3F));
  } else {
    out += char(0xF0 | code_point >> 18);
    out += char(0x80 | (code_point >> 12 & 0x3F));
    out += char(0x80 | (code_point >> 6 & 0x3F));
    out += char(0x80 | (code_point & 0x3F));
  }
}

void require_valid_utf8(std::string_view text, const std::string& origin) {
  size_t bad = 0;
  if (!is_valid_utf8(text, &bad)) {
    throw InputError(origin + ": text to encode is not valid UTF-8 at byte " + std::to_string(bad));
  }
}

}  // namespace moelab
