#include "data/unicode_forms.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <stdexcept>

#include "data/icu_set.h"

namespace moelab {

namespace {

const icu::Normalizer2& icu_form(UnicodeForm form) {
  using Instance = const icu::Normalizer2* (*)(UErrorCode&);
  static constexpr Instance kInstances[] = {
      &icu::Normalizer2::getNFCInstance, &icu::Normalizer2::getNFDInstance,
      &icu::Normalizer2::getNFKCInstance, &icu::Normalizer2::getNFKDInstance};
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = kInstances[int(form)](status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU: no normalizer data");
  return *normalizer;
}

const icu::UnicodeSet& unicode9_characters() {
  static const icu::UnicodeSet* set = frozen_unicode_set(u"[:age=9.0:]");
  return *set;
}

// One filtered normalizer per form, made once (ICU's are thread-safe to use).
const icu::Normalizer2* unicode9_normalizer(UnicodeForm form) {
  static const icu::FilteredNormalizer2* forms[] = {
      new icu::FilteredNormalizer2(icu_form(UnicodeForm::kNfc), unicode9_characters()),
      new icu::FilteredNormalizer2(icu_form(UnicodeForm::kNfd), unicode9_characters()),
      new icu::FilteredNormalizer2(icu_form(UnicodeForm::kNfkc), unicode9_characters()),
      new icu::FilteredNormalizer2(icu_form(UnicodeForm::kNfkd), unicode9_characters())};
  return forms[int(form)];
}

// Every byte below `bound`: ASCII (< 0x80) is in every form; below 0xCC
// (code points below U+0300, continuation bytes included) is NFC.
bool all_bytes_below(std::string_view text, unsigned bound) {
  unsigned high = 0;
  for (char c : text) high |= static_cast<unsigned char>(c) >= bound;
  return high == 0;
}

}  // namespace

UnicodeNormalizer::UnicodeNormalizer(UnicodeForm form)
    : form_(form), check_(&icu_form(form)), normalizer_(unicode9_normalizer(form)) {}

bool UnicodeNormalizer::normalize(std::string_view text, std::string& out) const {
  if (all_bytes_below(text, form_ == UnicodeForm::kNfc ? 0xCC : 0x80)) return false;
  // Text in the form by ICU's own (newer) data is in it by Unicode 9.0's: the
  // forms of old characters never change, and a span of old characters cut
  // out of such text is in the form too. ICU's unfiltered check is the faster.
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), int32_t(text.size()));
  const auto* check = static_cast<const icu::Normalizer2*>(check_);
  if (check->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return false;
  const auto* normalizer = static_cast<const icu::Normalizer2*>(normalizer_);
  out.clear();
  icu::StringByteSink<std::string> sink(&out, int32_t(text.size()));
  status = U_ZERO_ERROR;
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(status));
  return true;
}

}  // namespace moelab
