#include "data/hf_decoder.h"

#include "data/byte_alphabet.h"
#include "data/hf_refusal.h"
#include "data/utf8.h"

namespace moelab {

namespace {

// The character a decoder field names (exactly one).
std::string one_character(const JsonNode& node) {
  const std::string text = node.text();
  size_t end = 0;
  if (text.empty() || (next_code_point(text, &end), end != text.size())) {
    node.fail("expected one character");
  }
  return text;
}

class ByteLevelDecoder : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string text, bytes;
    for (const std::string& token : tokens)
      text += bytes_of_byte_alphabet(token, &bytes) ? bytes : token;
    tokens.assign(1, std::move(text));
  }
};

class MetaspaceDecoder : public DecoderStep {
 public:
  MetaspaceDecoder(std::string replacement, bool drop_first)
      : replacement_(std::move(replacement)), drop_first_(drop_first) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string text;
      const std::string& token = tokens[i];
      for (size_t at = 0; at < token.size();) {
        if (token.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && drop_first_)) text += ' ';
          at += replacement_.size();
        } else {
          text += token[at++];
        }
      }
      tokens[i] = std::move(text);
    }
  }

 private:
  std::string replacement_;
  bool drop_first_;
};

class ReplaceDecoder : public DecoderStep {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::string text;
      size_t copied = 0;
      for (size_t at = token.find(pattern_); at != std::string::npos;
           at = token.find(pattern_, copied)) {
        text.append(token, copied, at - copied);
        text += content_;
        copied = at + pattern_.size();
      }
      token = text + token.substr(copied);
    }
  }

 private:
  std::string pattern_;
  std::string content_;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A byte token <0xNN> (hex digits as Rust's u8::from_str_radix reads them).
bool byte_token(const std::string& token, char* byte) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return false;
  const int high = token[3] == '+' ? 0 : hex_digit(token[3]);
  const int low = hex_digit(token[4]);
  if (high < 0 || low < 0) return false;
  *byte = char(high * 16 + low);
  return true;
}

class ByteFallbackDecoder : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");  // U+FFFD
      }
      bytes.clear();
    };
    for (std::string& token : tokens) {
      char byte = 0;
      if (byte_token(token, &byte)) {
        bytes += byte;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string text;
    for (const std::string& token : tokens) text += token;
    tokens.assign(1, std::move(text));
  }
};

class StripDecoder : public DecoderStep {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    const size_t width = content_.size();
    for (std::string& token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t i = 0; i < start_ && token.compare(begin, width, content_) == 0; ++i) {
        begin += width;
      }
      for (size_t i = 0;
           i < stop_ && end >= begin + width && token.compare(end - width, width, content_) == 0;
           ++i) {
        end -= width;
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

}  // namespace

HfDecoder::HfDecoder(const JsonNode& node) {
  if (node.is_null()) {
    join_with_spaces_ = true;
    return;
  }
  add(node);
}

HfDecoder::~HfDecoder() = default;

void HfDecoder::add(const JsonNode& node) {
  const std::string type = node.type();
  if (type == "Sequence") {
    for (const JsonNode& step : node["decoders"].elements()) add(step);
  } else if (type == "ByteLevel") {
    steps_.push_back(std::make_unique<ByteLevelDecoder>());
  } else if (type == "Metaspace") {
    const bool never =
        node.text_or("prepend_scheme", "always") == "never" || !node.flag("add_prefix_space", true);
    steps_.push_back(
        std::make_unique<MetaspaceDecoder>(one_character(node["replacement"]), !never));
  } else if (type == "Replace" && node["pattern"].has("String") &&
             !node["pattern"]["String"].text().empty()) {
    steps_.push_back(
        std::make_unique<ReplaceDecoder>(node["pattern"]["String"].text(), node["content"].text()));
  } else if (type == "ByteFallback") {
    steps_.push_back(std::make_unique<ByteFallbackDecoder>());
  } else if (type == "Fuse") {
    steps_.push_back(std::make_unique<FuseDecoder>());
  } else if (type == "Strip") {
    const std::string what = "a decoder's strip count";
    steps_.push_back(std::make_unique<StripDecoder>(one_character(node["content"]),
                                                    node["start"].index_below(1 << 20, what),
                                                    node["stop"].index_below(1 << 20, what)));
  } else {
    refuse_component(node, "decoder " + type + (type == "Replace" ? " of a regex or \"\"" : ""));
  }
}

std::string HfDecoder::decode(std::vector<std::string> tokens) const {
  for (const auto& step : steps_) step->apply(tokens);
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (join_with_spaces_ && i > 0) text += ' ';
    text += tokens[i];
  }
  return text;
}

}  // namespace moelab
