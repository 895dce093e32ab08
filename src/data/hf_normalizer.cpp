#include "data/hf_normalizer.h"

#include "data/hf_refusal.h"
#include "data/unicode_chars.h"
#include "data/unicode_forms.h"
#include "data/utf8.h"

namespace moelab {

namespace {

class UnicodeFormStep : public NormalizerStep {
 public:
  explicit UnicodeFormStep(UnicodeForm form) : normalizer_(form) {}
  bool apply(std::string_view text, TextScratch&, std::string& out) const override {
    return normalizer_.normalize(text, out);
  }

 private:
  UnicodeNormalizer normalizer_;
};

class LowercaseStep : public NormalizerStep {
 public:
  bool apply(std::string_view text, TextScratch&, std::string& out) const override {
    size_t first = 0;  // the first byte that may change: an upper-case or non-ASCII one
    while (first < text.size() && static_cast<unsigned char>(text[first]) < 0x80 &&
           !(text[first] >= 'A' && text[first] <= 'Z')) {
      ++first;
    }
    if (first == text.size()) return false;
    out.assign(text.substr(0, first));
    for (size_t at = first; at < text.size();)
      append_rust_lowercase(next_code_point(text, &at), out);
    return true;
  }
};

class StripStep : public NormalizerStep {
 public:
  StripStep(bool left, bool right) : left_(left), right_(right) {}
  bool apply(std::string_view text, TextScratch&, std::string& out) const override {
    size_t begin = 0, end = text.size();
    while (left_ && begin < end) {
      size_t at = begin;
      if (!is_rust_whitespace(next_code_point(text, &at))) break;
      begin = at;
    }
    while (right_ && end > begin) {
      size_t start = end - 1;
      while ((static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t at = start;
      if (!is_rust_whitespace(next_code_point(text, &at))) break;
      end = start;
    }
    if (begin == 0 && end == text.size()) return false;
    out.assign(text.substr(begin, end - begin));
    return true;
  }
  bool keeps_start() const override { return !left_; }

 private:
  bool left_, right_;
};

// Replace: every match (a regex's as Oniguruma finds them, empty ones
// included; a string's occurrences, left to right) becomes `content`.
class ReplaceStep : public NormalizerStep {
 public:
  ReplaceStep(std::string literal, std::unique_ptr<SplitRegex> regex, std::string content,
              ScratchLayout& layout)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {
    if (regex_) matcher_ = layout.add_regex(*regex_);
  }
  bool apply(std::string_view text, TextScratch& scratch, std::string& out) const override {
    if (text.empty()) return false;  // `tokenizers` looks for no match in empty text
    size_t copied = 0;
    bool replaced = false;
    const auto replace = [&](size_t begin, size_t end) {
      if (!replaced) out.clear();
      replaced = true;
      out.append(text.substr(copied, begin - copied));
      out += content_;
      copied = end;
    };
    if (regex_) {
      scratch.matchers[matcher_]->for_each_match(text, replace);
    } else {
      for (size_t at = text.find(literal_); at != std::string_view::npos;
           at = text.find(literal_, at + literal_.size())) {
        replace(at, at + literal_.size());
      }
    }
    if (replaced) out.append(text.substr(copied));
    return replaced;
  }
  bool keeps_start() const override { return false; }

 private:
  std::string literal_;  // the pattern when it is a non-empty string
  std::unique_ptr<SplitRegex> regex_;
  size_t matcher_ = 0;
  std::string content_;
};

class PrependStep : public NormalizerStep {
 public:
  explicit PrependStep(std::string prefix) : prefix_(std::move(prefix)) {}
  bool apply(std::string_view text, TextScratch&, std::string& out) const override {
    if (text.empty() || prefix_.empty()) return false;
    out.assign(prefix_);
    out.append(text);
    return true;
  }

 private:
  std::string prefix_;
};

std::unique_ptr<NormalizerStep> replace_step(const JsonNode& node, ScratchLayout& layout) {
  const JsonNode pattern = node["pattern"];
  std::string content = node["content"].text();
  const std::string where = node.origin() + ": " + pattern.path();
  if (pattern.has("Regex")) {
    return std::make_unique<ReplaceStep>(
        "", std::make_unique<SplitRegex>(pattern["Regex"].text(), RegexDialect::kOniguruma, where),
        std::move(content), layout);
  }
  const std::string literal = pattern["String"].text();
  // The empty string is a regex that matches between every two characters.
  std::unique_ptr<SplitRegex> regex =
      literal.empty() ? std::make_unique<SplitRegex>("", RegexDialect::kOniguruma, where) : nullptr;
  return std::make_unique<ReplaceStep>(literal, std::move(regex), std::move(content), layout);
}

std::unique_ptr<NormalizerStep> unicode_form_step(const std::string& type) {
  if (type == "NFC") return std::make_unique<UnicodeFormStep>(UnicodeForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeFormStep>(UnicodeForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeFormStep>(UnicodeForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeFormStep>(UnicodeForm::kNfkd);
  return nullptr;
}

}  // namespace

HfNormalizer::HfNormalizer(const JsonNode& node, ScratchLayout& layout) {
  if (node.is_null()) return;
  add(node, layout);
  buffers_[0] = layout.add_buffer();
  buffers_[1] = layout.add_buffer();
}

void HfNormalizer::add(const JsonNode& node, ScratchLayout& layout) {
  const std::string type = node.type();
  if (type == "Sequence") {
    for (const JsonNode& step : node["normalizers"].elements()) add(step, layout);
  } else if (auto form = unicode_form_step(type)) {
    steps_.push_back(std::move(form));
  } else if (type == "Lowercase") {
    steps_.push_back(std::make_unique<LowercaseStep>());
  } else if (type == "Strip") {
    steps_.push_back(
        std::make_unique<StripStep>(node["strip_left"].boolean(), node["strip_right"].boolean()));
  } else if (type == "Replace") {
    steps_.push_back(replace_step(node, layout));
  } else if (type == "Prepend") {
    steps_.push_back(std::make_unique<PrependStep>(node["prepend"].text()));
  } else {
    refuse_component(node, "normalizer " + type);
  }
}

bool HfNormalizer::keeps_start() const {
  for (const auto& step : steps_) {
    if (!step->keeps_start()) return false;
  }
  return true;
}

std::string_view HfNormalizer::apply(std::string_view text, TextScratch& scratch) const {
  int next = 0;  // the buffer the next changing step writes into
  for (const auto& step : steps_) {
    std::string& out = scratch.buffers[buffers_[next]];
    if (step->apply(text, scratch, out)) {
      text = out;
      next ^= 1;
    }
  }
  return text;
}

}  // namespace moelab
