// The Unicode normalization forms of tokenizer.json normalizers (NFC, NFD,
// NFKC, NFKD) through ICU, as the pinned `tokenizers` computes them: its
// normalization crate carries Unicode 9.0 data, so ICU's normalizer is
// restricted to the characters of Unicode 9.0 (ICU's FilteredNormalizer2 over
// [:age=9.0:]); later characters pass unchanged and are never composed or
// reordered, exactly as in `tokenizers` (HfTokenizerUnicode.* checks every
// code point and every combining mark against it).
//
// Text already in the form costs one scan: a byte scan for ASCII (and, for
// NFC, anything below U+0300), then ICU's quick check with its own data (text
// in the form by it is in the form by Unicode 9.0's); only text that fails it
// is normalised into a buffer.
#pragma once

#include <string>
#include <string_view>

namespace moelab {

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

class UnicodeNormalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form);
  // False when `text` is already in the form (`out` untouched); otherwise true
  // with the normalised text in `out`.
  bool normalize(std::string_view text, std::string& out) const;

 private:
  UnicodeForm form_;
  // icu::Normalizer2s (static, thread-safe): ICU's own, which checks, and the
  // one filtered to Unicode 9.0, which normalises.
  const void* check_;
  const void* normalizer_;
};

}  // namespace moelab
