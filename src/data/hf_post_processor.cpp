#include "data/hf_post_processor.h"

#include "data/hf_refusal.h"

namespace moelab {

namespace {

// The ids of special token `name` in a TemplateProcessing's "special_tokens".
std::vector<uint32_t> special_token_ids(const JsonNode& processor, const std::string& name,
                                        uint64_t vocab_size) {
  const JsonNode specials = processor["special_tokens"];
  if (!specials.has(name.c_str())) {
    specials.fail("lacks \"" + name + "\", which the single-sequence template names");
  }
  std::vector<uint32_t> ids;
  for (const JsonNode& id : specials[name.c_str()]["ids"].elements()) {
    ids.push_back(uint32_t(id.index_below(vocab_size, "a token id of the file's vocabulary")));
  }
  return ids;
}

// TemplateProcessing's "single": special tokens around one Sequence "A".
DocumentTemplate single_template(const JsonNode& processor, uint64_t vocab_size) {
  DocumentTemplate made;
  bool seen_sequence = false;
  for (const JsonNode& piece : processor["single"].elements()) {
    if (piece.has("Sequence")) {
      const JsonNode sequence = piece["Sequence"];
      if (seen_sequence || sequence["id"].text() != "A") {
        refuse_component(sequence, "a single-sequence template that is not one sequence A");
      }
      seen_sequence = true;
      continue;
    }
    const std::string name = piece["SpecialToken"]["id"].text();
    std::vector<uint32_t>& side = seen_sequence ? made.after : made.before;
    for (uint32_t id : special_token_ids(processor, name, vocab_size)) side.push_back(id);
  }
  if (!seen_sequence) processor["single"].fail("has no Sequence A");
  return made;
}

// `outer` applied to what `inner` made.
DocumentTemplate nest(const DocumentTemplate& inner, const DocumentTemplate& outer) {
  DocumentTemplate made = outer;
  made.before.insert(made.before.end(), inner.before.begin(), inner.before.end());
  made.after.insert(made.after.begin(), inner.after.begin(), inner.after.end());
  return made;
}

}  // namespace

DocumentTemplate parse_document_template(const JsonNode& node, uint64_t vocab_size) {
  if (node.is_null()) return {};
  const std::string type = node.type();
  if (type == "TemplateProcessing") return single_template(node, vocab_size);
  if (type == "ByteLevel") return {};
  if (type != "Sequence") refuse_component(node, "post-processor " + type);
  DocumentTemplate made;
  for (const JsonNode& step : node["processors"].elements()) {
    made = nest(made, parse_document_template(step, vocab_size));
  }
  return made;
}

}  // namespace moelab
