#include "data/hf_pre_tokenizer.h"

#include "data/byte_alphabet.h"
#include "data/hf_refusal.h"
#include "data/split_behavior.h"
#include "data/unicode_chars.h"
#include "data/utf8.h"

namespace moelab {

namespace {

// Split: a regex (or a string, matched literally) and a behaviour.
class SplitStep : public PreTokenizerStep {
 public:
  SplitStep(const std::string& pattern, SplitBehavior behavior, bool invert,
            const std::string& origin, ScratchLayout& layout)
      : regex_(pattern, RegexDialect::kOniguruma, origin),
        matcher_(layout.add_regex(regex_)),
        behavior_(behavior),
        invert_(invert) {}
  void split(std::string_view text, bool at_start, TextScratch& scratch,
             PieceSink emit) const override {
    const auto piece = [&](size_t begin, size_t end) {
      emit(text.substr(begin, end - begin), at_start && begin == 0);
    };
    BehaviorSplitter splitter(behavior_, piece);
    split_by_regex(text, *scratch.matchers[matcher_], invert_, splitter);
  }

 private:
  SplitRegex regex_;
  size_t matcher_;
  SplitBehavior behavior_;
  bool invert_;
};

// Punctuation, Digits, WhitespaceSplit: a character class and a behaviour.
class ClassStep : public PreTokenizerStep {
 public:
  ClassStep(bool (*in_class)(char32_t), SplitBehavior behavior)
      : in_class_(in_class), behavior_(behavior) {}
  void split(std::string_view text, bool at_start, TextScratch&, PieceSink emit) const override {
    const auto piece = [&](size_t begin, size_t end) {
      emit(text.substr(begin, end - begin), at_start && begin == 0);
    };
    BehaviorSplitter splitter(behavior_, piece);
    split_by_class(text, in_class_, splitter);
  }

 private:
  bool (*in_class_)(char32_t);
  SplitBehavior behavior_;
};

// Whitespace: the regex \w+|[^\w\s]+, whose matches are the pieces.
class WhitespaceStep : public PreTokenizerStep {
 public:
  void split(std::string_view text, bool at_start, TextScratch&, PieceSink emit) const override {
    enum Kind { kWord, kOther, kSpace };
    // The kind of the character at text[at]; *next: where the one after starts.
    const auto kind_at = [&](size_t at, size_t* next) {
      *next = at;
      const char32_t c = next_code_point(text, next);
      return is_rust_word(c) ? kWord : is_rust_whitespace(c) ? kSpace : kOther;
    };
    size_t at = 0, next = 0;
    while (at < text.size()) {
      const Kind kind = kind_at(at, &next);
      if (kind == kSpace) {
        at = next;
        continue;
      }
      const size_t begin = at;
      for (at = next; at < text.size() && kind_at(at, &next) == kind;) at = next;
      emit(text.substr(begin, at - begin), at_start && begin == 0);
    }
  }
};

// Metaspace: spaces become `replacement`, which is prepended as the scheme
// says and (with `split`) starts each word.
class MetaspaceStep : public PreTokenizerStep {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspaceStep(std::string replacement, Prepend prepend, bool split, ScratchLayout& layout)
      : replacement_(std::move(replacement)),
        prepend_(prepend),
        split_(split),
        buffer_(layout.add_buffer()) {
    size_t at = 0;
    replacement_char_ = next_code_point(replacement_, &at);
  }
  void split(std::string_view text, bool at_start, TextScratch& scratch,
             PieceSink emit) const override {
    std::string& spaced = scratch.buffers[buffer_];
    spaced.clear();
    const bool starts_with_replacement =
        text.substr(0, replacement_.size()) == replacement_ || (!text.empty() && text[0] == ' ');
    if (!starts_with_replacement &&
        (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start))) {
      spaced += replacement_;
    }
    for (char c : text) {
      if (c == ' ') {
        spaced += replacement_;
      } else {
        spaced += c;
      }
    }
    if (!split_) {
      emit(spaced, at_start);
      return;
    }
    const std::string_view all = spaced;
    const auto piece = [&](size_t begin, size_t end) {
      emit(all.substr(begin, end - begin), at_start && begin == 0);
    };
    BehaviorSplitter splitter(SplitBehavior::kMergedWithNext, piece);
    split_by_class(
        all, [this](char32_t c) { return c == replacement_char_; }, splitter);
  }

 private:
  std::string replacement_;
  char32_t replacement_char_;
  Prepend prepend_;
  bool split_;
  size_t buffer_;
};

// ByteLevel: a space in front (add_prefix_space), GPT-2's regex (use_regex),
// and, when steps follow, the pieces written in the byte alphabet.
class ByteLevelStep : public PreTokenizerStep {
 public:
  ByteLevelStep(bool add_prefix_space, bool use_regex, bool to_alphabet, const std::string& origin,
                ScratchLayout& layout)
      : add_prefix_space_(add_prefix_space),
        to_alphabet_(to_alphabet),
        prefixed_(layout.add_buffer()),
        mapped_(layout.add_buffer()) {
    if (use_regex) {
      regex_ = std::make_unique<SplitRegex>(kGpt2Pattern, RegexDialect::kOniguruma, origin);
      matcher_ = layout.add_regex(*regex_);
    }
  }
  void split(std::string_view text, bool at_start, TextScratch& scratch,
             PieceSink emit) const override {
    std::string_view source = text;
    if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
      std::string& prefixed = scratch.buffers[prefixed_];
      prefixed.clear();
      prefixed += ' ';
      prefixed += text;
      source = prefixed;
    }
    const auto each = [&](std::string_view piece) {
      const bool start = at_start && piece.data() == source.data();
      if (!to_alphabet_) return emit(piece, start);
      std::string& mapped = scratch.buffers[mapped_];
      mapped.clear();
      append_in_byte_alphabet(piece, mapped);
      emit(mapped, start);
    };
    if (regex_) {
      scratch.matchers[matcher_]->split(source, each);
    } else {
      each(source);
    }
  }

 private:
  bool add_prefix_space_;
  bool to_alphabet_;
  std::unique_ptr<SplitRegex> regex_;
  size_t matcher_ = 0;
  size_t prefixed_, mapped_;
};

SplitBehavior behavior_of(const JsonNode& node) {
  const JsonNode name = node["behavior"];
  const auto behavior = split_behavior_named(name.text());
  if (!behavior) {
    name.fail("expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
  }
  return *behavior;
}

// Split's pattern as a regex: a string is matched literally.
std::string split_pattern(const JsonNode& node) {
  const JsonNode pattern = node["pattern"];
  if (pattern.has("Regex")) return pattern["Regex"].text();
  std::string escaped;
  for (char c : pattern["String"].text()) {
    const bool plain = static_cast<unsigned char>(c) >= 0x80 || (c >= '0' && c <= '9') ||
                       (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (!plain) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::unique_ptr<PreTokenizerStep> metaspace_step(const JsonNode& node, ScratchLayout& layout) {
  const JsonNode replacement = node["replacement"];
  const std::string text = replacement.text();
  size_t end = 0;
  if (text.empty() || (next_code_point(text, &end), end != text.size())) {
    replacement.fail("expected one character");
  }
  const std::string scheme = node.text_or("prepend_scheme", "always");
  using Prepend = MetaspaceStep::Prepend;
  Prepend prepend = Prepend::kNever;
  if (scheme == "always") {
    prepend = Prepend::kAlways;
  } else if (scheme == "first") {
    prepend = Prepend::kFirst;
  } else if (scheme != "never") {
    node["prepend_scheme"].fail("expected always, first or never");
  }
  if (!node.flag("add_prefix_space", true) && prepend != Prepend::kNever) {
    node["add_prefix_space"].fail("false contradicts prepend_scheme " + scheme);
  }
  return std::make_unique<MetaspaceStep>(text, prepend, node.flag("split", true), layout);
}

// The steps of a pre_tokenizer, Sequences flattened.
void flatten(const JsonNode& node, std::vector<JsonNode>& steps) {
  if (node.type() != "Sequence") {
    steps.push_back(node);
    return;
  }
  for (const JsonNode& step : node["pretokenizers"].elements()) flatten(step, steps);
}

}  // namespace

HfPreTokenizer::HfPreTokenizer(const JsonNode& node, ScratchLayout& layout) {
  if (node.is_null()) return;
  std::vector<JsonNode> steps;
  flatten(node, steps);
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    words_in_byte_alphabet_ = words_in_byte_alphabet_ || steps[i].type() == "ByteLevel";
  }
  for (const JsonNode& step : steps) add(step, layout);
}

HfPreTokenizer::~HfPreTokenizer() = default;

void HfPreTokenizer::add(const JsonNode& node, ScratchLayout& layout) {
  const std::string type = node.type();
  if (byte_level_ && (type == "ByteLevel" || type == "Metaspace")) {
    refuse_component(node, "pre-tokenizer " + type + " after ByteLevel");
  }
  if (type == "Split") {
    const bool invert = node["invert"].boolean();
    steps_.push_back(std::make_unique<SplitStep>(split_pattern(node), behavior_of(node), invert,
                                                 node.origin() + ": " + node["pattern"].path(),
                                                 layout));
  } else if (type == "Punctuation") {
    const SplitBehavior behavior =
        node.has("behavior") ? behavior_of(node) : SplitBehavior::kIsolated;
    steps_.push_back(std::make_unique<ClassStep>(is_tokenizers_punctuation, behavior));
  } else if (type == "Digits") {
    const bool individual = node["individual_digits"].boolean();
    steps_.push_back(std::make_unique<ClassStep>(
        is_rust_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  } else if (type == "Whitespace") {
    steps_.push_back(std::make_unique<WhitespaceStep>());
  } else if (type == "WhitespaceSplit") {
    steps_.push_back(std::make_unique<ClassStep>(is_rust_whitespace, SplitBehavior::kRemoved));
  } else if (type == "Metaspace") {
    metaspace_ = true;
    asks_text_start_ = asks_text_start_ || node.text_or("prepend_scheme", "") == "first";
    steps_.push_back(metaspace_step(node, layout));
  } else if (type == "ByteLevel") {
    if (metaspace_) refuse_component(node, "pre-tokenizer ByteLevel after Metaspace");
    byte_level_ = true;
    const bool prefix = node["add_prefix_space"].boolean();
    const bool regex = node.flag("use_regex", true);
    // A last ByteLevel that neither prefixes nor splits leaves the words as
    // they are: the byte-level model reads their bytes directly.
    if (prefix || regex || words_in_byte_alphabet_) {
      steps_.push_back(std::make_unique<ByteLevelStep>(prefix, regex, words_in_byte_alphabet_,
                                                       node.origin(), layout));
    }
  } else {
    refuse_component(node, "pre-tokenizer " + type);
  }
}

void HfPreTokenizer::run(std::string_view text, bool at_start, TextScratch& scratch,
                         FunctionRef<void(std::string_view)> word) const {
  run_from(0, text, at_start, scratch, word);
}

void HfPreTokenizer::run_from(size_t step, std::string_view text, bool at_start,
                              TextScratch& scratch,
                              FunctionRef<void(std::string_view)> word) const {
  if (step == steps_.size()) {
    word(text);
    return;
  }
  steps_[step]->split(text, at_start, scratch, [&](std::string_view piece, bool piece_at_start) {
    run_from(step + 1, piece, piece_at_start, scratch, word);
  });
}

}  // namespace moelab
