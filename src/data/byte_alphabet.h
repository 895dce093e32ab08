// GPT-2's byte alphabet (bytes_to_unicode), in which byte-level tokenizer.json
// files write their vocabulary and which their ByteLevel pre-tokenizer maps
// text into: printable Latin-1 bytes stand for themselves, the others for
// U+0100 onwards, in byte order.
#pragma once

#include <string>
#include <string_view>

namespace moelab {

// The UTF-8 of the character standing for `byte`.
const std::string& byte_alphabet_char(unsigned char byte);

// Appends the characters standing for each byte of `bytes`.
void append_in_byte_alphabet(std::string_view bytes, std::string& out);

// The bytes `text` (characters of the alphabet) stands for; false when it has
// a character outside the alphabet (`bytes` then holds an unspecified prefix).
bool bytes_of_byte_alphabet(std::string_view text, std::string* bytes);

}  // namespace moelab
