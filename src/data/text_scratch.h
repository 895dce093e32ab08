// The working state of one tokenizer pipeline call (one per thread): a
// matcher per regex the pipeline's steps hold, and text buffers the steps
// write into. Steps register what they need in a ScratchLayout while they are
// built and keep the indices; each call then makes its own TextScratch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/split_regex.h"

namespace moelab {

struct TextScratch {
  std::vector<std::unique_ptr<SplitRegex::Matcher>> matchers;
  std::vector<std::string> buffers;
};

class ScratchLayout {
 public:
  size_t add_regex(const SplitRegex& regex) {
    regexes_.push_back(&regex);
    return regexes_.size() - 1;
  }
  size_t add_buffer() { return buffers_++; }

  TextScratch make() const {
    TextScratch scratch;
    for (const SplitRegex* regex : regexes_) {
      scratch.matchers.push_back(std::make_unique<SplitRegex::Matcher>(*regex));
    }
    scratch.buffers.resize(buffers_);
    return scratch;
  }

 private:
  std::vector<const SplitRegex*> regexes_;
  size_t buffers_ = 0;
};

}  // namespace moelab
