// UTF-8 for corpus text: validation (SentencePiece would silently mangle
// invalid bytes, so prep rejects them up front and says where they are), and
// stepping through and writing code points of text already validated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moelab {

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF). On failure `bad_offset` (if given) receives the byte
// offset of the first invalid sequence.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// InputError "<origin>: text to encode is not valid UTF-8 at byte N" unless
// `text` is valid: what the encoders say before touching it.
void require_valid_utf8(std::string_view text, const std::string& origin);

// Length of the valid UTF-8 sequence starting at text[i] (1 to 4), or 0 when
// the bytes there are not one.
size_t utf8_sequence_length(std::string_view text, size_t i);

// The code point starting at text[*at] of valid UTF-8 text; advances *at past it.
char32_t next_code_point(std::string_view text, size_t* at);

// Appends the UTF-8 encoding of `code_point`.
void append_utf8(char32_t code_point, std::string& out);

}  // namespace moelab
