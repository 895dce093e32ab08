// A frozen ICU UnicodeSet made from a pattern once (keep the result in a
// function-local static): the character sets the tokenizer.json Unicode rules
// are restricted to (unicode_chars.h, unicode_forms.h).
#pragma once

#include <unicode/uniset.h>

#include <stdexcept>
#include <string>

namespace moelab {

inline const icu::UnicodeSet* frozen_unicode_set(const char16_t* pattern) {
  UErrorCode status = U_ZERO_ERROR;
  auto* set = new icu::UnicodeSet(icu::UnicodeString(pattern), status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU cannot build a Unicode set pattern");
  set->freeze();
  return set;
}

}  // namespace moelab
