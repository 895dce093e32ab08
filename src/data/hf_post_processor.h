// The part of a tokenizer.json `post_processor` that changes a document's
// ids: the special tokens its TemplateProcessing template puts around a
// single sequence (Llama's <s> / <|begin_of_text|> before it), which
// `tokenizers` adds with add_special_tokens=True. A Sequence of processors
// nests their templates; ByteLevel only moves offsets. Bert/Roberta
// processors are refused by name.
#pragma once

#include <cstdint>

#include "data/json_node.h"
#include "data/text_encoder.h"

namespace moelab {

// The template of the file's "post_processor" (null: none); ids must lie
// below `vocab_size`.
DocumentTemplate parse_document_template(const JsonNode& node, uint64_t vocab_size);

}  // namespace moelab
