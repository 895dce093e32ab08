#include "data/unicode_chars.h"

#include <unicode/uchar.h>
#include "data/icu_set.h"
#include "data/utf8.h"

namespace moelab {

namespace {

// Punctuation as the `unicode_categories` crate (Unicode 8.0) knows it: the
// P* characters of 8.0, plus the two whose category has changed since
// (U+166D CANADIAN SYLLABICS CHI SIGN and U+111C9 SHARADA SANDHI MARK were Po).
const icu::UnicodeSet& unicode8_punctuation() {
  static const icu::UnicodeSet* set =
      frozen_unicode_set(u"[[[:P:]&[:age=8.0:]]\\u166D\\U000111C9]");
  return *set;
}

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

}  // namespace

bool is_rust_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE);
}

bool is_rust_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t type = u_charType(UChar32(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_rust_word(char32_t c) {
  if (c < 0x80) return is_ascii_alnum(c) || c == '_';
  const int8_t type = u_charType(UChar32(c));
  return type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_DECIMAL_DIGIT_NUMBER ||
         type == U_CONNECTOR_PUNCTUATION || u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC) ||
         u_hasBinaryProperty(UChar32(c), UCHAR_JOIN_CONTROL);
}

bool is_tokenizers_punctuation(char32_t c) {
  if (c < 0x80) return c > ' ' && c < 0x7F && !is_ascii_alnum(c);
  return unicode8_punctuation().contains(UChar32(c));
}

void append_rust_lowercase(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += char(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
  } else if (c == 0x130) {  // the one unconditional full lowercase mapping of two characters
    out += "i\xCC\x87";
  } else {
    append_utf8(char32_t(u_tolower(UChar32(c))), out);
  }
}

}  // namespace moelab
