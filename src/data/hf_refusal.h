// The one message for a tokenizer.json component moelab does not implement:
// it names the file, the field and the component, so a file is either encoded
// exactly as `tokenizers` encodes it or refused.
#pragma once

#include <string>

#include "data/json_node.h"
#include "util/error.h"

namespace moelab {

[[noreturn]] inline void refuse_component(const JsonNode& node, const std::string& what) {
  throw InputError(node.origin() + ": " + what +
                   " is not supported by moelab's tokenizer.json reader (at " +
                   (node.path().empty() ? std::string("the top level") : node.path()) +
                   "; docs/data.md lists what it reads)");
}

}  // namespace moelab
