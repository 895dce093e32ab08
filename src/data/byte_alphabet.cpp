#include "data/byte_alphabet.h"

#include <array>

#include "data/utf8.h"

namespace moelab {

namespace {

bool is_printable(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> char_of;  // byte -> UTF-8 of its character
  std::array<int, 0x144> byte_of;        // character (below U+0144) -> byte, or -1

  Alphabet() {
    byte_of.fill(-1);
    char32_t next = 0x100;
    for (unsigned byte = 0; byte < 256; ++byte) {
      const char32_t c = is_printable(byte) ? byte : next++;
      append_utf8(c, char_of[byte]);
      byte_of[c] = int(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet made;
  return made;
}

}  // namespace

const std::string& byte_alphabet_char(unsigned char byte) {
  return alphabet().char_of[byte];
}

void append_in_byte_alphabet(std::string_view bytes, std::string& out) {
  const Alphabet& table = alphabet();
  for (char c : bytes) out += table.char_of[static_cast<unsigned char>(c)];
}

bool bytes_of_byte_alphabet(std::string_view text, std::string* bytes) {
  const Alphabet& table = alphabet();
  bytes->clear();
  for (size_t at = 0; at < text.size();) {
    if (utf8_sequence_length(text, at) == 0) return false;
    const char32_t c = next_code_point(text, &at);
    if (c >= table.byte_of.size() || table.byte_of[c] < 0) return false;
    *bytes += char(table.byte_of[c]);
  }
  return true;
}

}  // namespace moelab
