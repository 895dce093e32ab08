#include "data/hf_bpe_spec.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "data/hf_refusal.h"

namespace moelab {

using nlohmann::json;

namespace {

void parse_model_options(const JsonNode& model, HfBpeModel* out) {
  const std::string type = model.has("type")     ? model["type"].text()
                           : model.has("merges") ? "BPE"
                                                 : "(untyped)";
  if (type != "BPE") refuse_component(model, "model " + type);
  if (model.has("dropout")) refuse_component(model["dropout"], "BPE dropout");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.has(key) && !model[key].text().empty()) {
      refuse_component(model[key], std::string("BPE ") + key);
    }
  }
  out->byte_fallback = model.flag("byte_fallback", false);
  out->fuse_unk = model.flag("fuse_unk", false);
  out->ignore_merges = model.flag("ignore_merges", false);
  if (model.has("unk_token")) out->unk_token = model["unk_token"].text();
}

// Vocabulary ids below `id_limit`, each token's its own.
void parse_vocab(const JsonNode& model, uint64_t id_limit, const std::string& why,
                 HfBpeModel* out) {
  const JsonNode vocab = model["vocab"];
  std::vector<int64_t> entry_of_id(id_limit, -1);
  out->vocab.reserve(vocab.object().size());
  for (const auto& [token, id] : vocab.object().items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= id_limit) {
      vocab[token].index_below(id_limit, why);  // says what is wrong
    }
    const uint64_t value = id.get<uint64_t>();
    if (entry_of_id[value] >= 0) {
      vocab[token].fail(std::to_string(value) + " is also the id of " +
                        json(out->vocab[size_t(entry_of_id[value])].first).dump() +
                        " (two tokens with one id)");
    }
    entry_of_id[value] = int64_t(out->vocab.size());
    out->vocab.emplace_back(token, uint32_t(value));
  }
}

void parse_merges(const JsonNode& model, HfBpeModel* out) {
  if (!model.has("merges")) return;
  const JsonNode merges = model["merges"];
  if (!merges.raw().is_array()) merges.fail("expected an array of merges");
  out->merges.reserve(merges.raw().size());
  for (size_t i = 0; i < merges.raw().size(); ++i) {
    const json& merge = merges.raw()[i];
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      out->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::string* text = merge.get_ptr<const std::string*>();
    const size_t space = text ? text->find(' ') : std::string::npos;
    if (space == std::string::npos || text->find(' ', space + 1) != std::string::npos) {
      merges.element(i).fail("expected \"a b\" or [\"a\", \"b\"]");
    }
    out->merges.emplace_back(text->substr(0, space), text->substr(space + 1));
  }
}

HfAddedToken parse_added_token(const JsonNode& node) {
  HfAddedToken token;
  token.content = node["content"].text();
  if (token.content.empty()) node["content"].fail("is empty");
  token.special = node["special"].boolean();
  token.normalized = node["normalized"].boolean();
  token.lstrip = node["lstrip"].boolean();
  token.rstrip = node["rstrip"].boolean();
  token.single_word = node["single_word"].boolean();
  return token;
}

// Added tokens with the ids `tokenizers` gives them: a token of the
// vocabulary keeps its id, the others are numbered on from the vocabulary's
// size, in the order listed; the file's ids must say the same.
std::vector<HfAddedToken> parse_added_tokens(const std::vector<JsonNode>& list,
                                             const HfBpeModel& model, const std::string& why,
                                             uint64_t id_limit) {
  std::unordered_map<std::string_view, uint32_t> vocab_ids;
  vocab_ids.reserve(model.vocab.size());
  for (const auto& [token, id] : model.vocab) vocab_ids.emplace(token, id);
  std::unordered_map<std::string, size_t> listed;  // content -> index in the list
  std::vector<HfAddedToken> tokens;
  uint64_t next_id = model.vocab.size();
  for (const JsonNode& node : list) {
    HfAddedToken token = parse_added_token(node);
    const auto [first, inserted] = listed.emplace(token.content, tokens.size());
    if (!inserted)
      node["content"].fail("repeats added_tokens[" + std::to_string(first->second) + "]");
    const auto in_vocab = vocab_ids.find(token.content);
    const uint64_t expected = in_vocab != vocab_ids.end() ? in_vocab->second : next_id++;
    token.id = uint32_t(node["id"].index_below(id_limit, why));
    if (token.id != expected) {
      node["id"].fail(std::to_string(token.id) + ", but `tokenizers` numbers this token " +
                      std::to_string(expected) +
                      (in_vocab != vocab_ids.end()
                           ? " (its id in model.vocab)"
                           : " (added tokens outside the vocabulary follow its entries in order)"));
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

void refuse_encoding_options(const JsonNode& root) {
  for (const char* key : {"truncation", "padding"}) {
    if (root.has(key))
      refuse_component(root[key], std::string(key) + " (moelab encodes whole documents)");
  }
}

}  // namespace

HfBpeSpec parse_hf_bpe(const std::string& json_text, const std::string& origin,
                       ScratchLayout& layout) {
  const json document = parse_json_file(json_text, origin);
  const JsonNode root(document, "", origin);
  if (!document.is_object() || !root.has("model")) {
    root.fail("not a Hugging Face tokenizer.json (no \"model\" object)");
  }
  refuse_encoding_options(root);
  HfBpeSpec spec;
  const JsonNode model = root["model"];
  parse_model_options(model, &spec.model);
  const JsonNode added = root.member_or_null("added_tokens");
  const std::vector<JsonNode> added_list =
      added.is_null() ? std::vector<JsonNode>() : added.elements();
  const size_t entries = model["vocab"].object().size();
  const uint64_t id_limit = entries + added_list.size();
  const std::string why = "a file of " + std::to_string(entries) + " vocabulary entries and " +
                          std::to_string(added_list.size()) + " added tokens numbers them from 0";
  parse_vocab(model, id_limit, why, &spec.model);
  parse_merges(model, &spec.model);
  spec.added_tokens = parse_added_tokens(added_list, spec.model, why, id_limit);
  for (const auto& [token, id] : spec.model.vocab) {
    spec.vocab_size = std::max<int64_t>(spec.vocab_size, int64_t(id) + 1);
  }
  for (const HfAddedToken& token : spec.added_tokens) {
    spec.vocab_size = std::max<int64_t>(spec.vocab_size, int64_t(token.id) + 1);
  }
  spec.normalizer = std::make_unique<HfNormalizer>(root.member_or_null("normalizer"), layout);
  spec.pre_tokenizer =
      std::make_unique<HfPreTokenizer>(root.member_or_null("pre_tokenizer"), layout);
  if (spec.pre_tokenizer->asks_text_start() && !spec.normalizer->keeps_start()) {
    refuse_component(root["pre_tokenizer"],
                     "Metaspace prepend_scheme \"first\" after a Strip or Replace normalizer");
  }
  spec.document_template =
      parse_document_template(root.member_or_null("post_processor"), uint64_t(spec.vocab_size));
  spec.decoder = std::make_unique<HfDecoder>(root.member_or_null("decoder"));
  return spec;
}

}  // namespace moelab
