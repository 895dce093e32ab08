#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/split_regex.h"

#include <pcre2.h>

#include "util/error.h"

namespace moelab {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// The patterns tiktoken 0.12 gives its encodings (tiktoken_ext/openai_public.py).
constexpr const char* kTiktokenGpt2 =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";
constexpr const char* kTiktokenCl100k =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)";
constexpr const char* kTiktokenO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr size_t kJitStackStart = 32 * 1024;
constexpr size_t kJitStackMax = 64 * 1024 * 1024;

pcre2_code* code_of(void* code) {
  return static_cast<pcre2_code*>(code);
}

}  // namespace

std::string tiktoken_pattern(const std::string& name) {
  if (name == "gpt2" || name == "r50k") return kTiktokenGpt2;
  if (name == "cl100k") return kTiktokenCl100k;
  if (name == "o200k") return kTiktokenO200k;
  return name;
}

SplitRegex::SplitRegex(const std::string& pattern, RegexDialect dialect, const std::string& origin)
    : pattern_(pattern) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  options |= dialect == RegexDialect::kOniguruma ? PCRE2_MULTILINE : PCRE2_DOLLAR_ENDONLY;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw InputError(origin + ": regex does not compile at offset " + std::to_string(error_offset) +
                     " (" + reinterpret_cast<char*>(message) + "): " + pattern);
  }
  code_ = code;
  if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) {
    pcre2_code_free(code);
    throw InputError(origin + ": PCRE2 cannot JIT-compile the regex " + pattern);
  }
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(code_of(code_));
}

struct SplitRegex::Matcher::State {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
};

SplitRegex::Matcher::Matcher(const SplitRegex& regex)
    : regex_(regex), state_(std::make_unique<State>()) {
  state_->data = pcre2_match_data_create_from_pattern(code_of(regex.code_), nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  state_->stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
  if (!state_->data || !state_->context || !state_->stack) throw std::bad_alloc();
  pcre2_jit_stack_assign(state_->context, nullptr, state_->stack);
}

SplitRegex::Matcher::~Matcher() {
  pcre2_jit_stack_free(state_->stack);
  pcre2_match_context_free(state_->context);
  pcre2_match_data_free(state_->data);
}

bool SplitRegex::Matcher::find(std::string_view text, size_t from, size_t* begin, size_t* end) {
  const int found =
      pcre2_jit_match(code_of(regex_.code_), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                      from, 0, state_->data, state_->context);
  if (found == PCRE2_ERROR_NOMATCH) return false;
  if (found < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(found, message, sizeof(message));
    throw InputError("regex failed on a " + std::to_string(text.size()) + "-byte text (" +
                     reinterpret_cast<char*>(message) + "): " + regex_.pattern_);
  }
  const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(state_->data);
  *begin = offsets[0];
  *end = offsets[1];
  return true;
}

}  // namespace moelab
