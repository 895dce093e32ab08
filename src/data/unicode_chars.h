// Character classes and case mapping as Hugging Face `tokenizers` (Rust)
// applies them in its normalizers and pre-tokenizers, answered by ICU
// (Debian's libicu). Each matches the pinned `tokenizers` on every code point
// ICU has assigned (HfTokenizerUnicode.* in tests/data/hf_unicode_test.cpp);
// characters of Unicode versions newer than ICU's may differ (docs/data.md).
#pragma once

#include <string>

namespace moelab {

// Rust char::is_whitespace and regex `\s`: the White_Space property.
bool is_rust_whitespace(char32_t c);
// Rust char::is_numeric: general category Nd, Nl or No (the Digits pre-tokenizer).
bool is_rust_numeric(char32_t c);
// Rust regex `\w`: Alphabetic, marks, Nd, Pc or Join_Control (Whitespace
// pre-tokenizer, single_word added tokens).
bool is_rust_word(char32_t c);
// The Punctuation pre-tokenizer's test: ASCII punctuation, or general
// category P* in the Unicode 8.0 tables of the `unicode_categories` crate
// `tokenizers` uses.
bool is_tokenizers_punctuation(char32_t c);
// Appends Rust's char::to_lowercase(c) (full mapping, no context).
void append_rust_lowercase(char32_t c, std::string& out);

}  // namespace moelab
