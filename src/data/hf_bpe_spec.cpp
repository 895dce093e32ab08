#include "data/hf_bpe_spec.h"

#include <nlohmann/json.hpp>

#include "data/split_regex.h"
#include "util/error.h"

namespace moelab {

using nlohmann::json;

namespace {

constexpr const char* kMetaspace = "\xE2\x96\x81";  // "▁"

[[noreturn]] void refuse(const std::string& origin, const std::string& what) {
  throw InputError(origin + ": " + what +
                   " is not supported by moelab's tokenizer.json reader (it reads BPE models "
                   "with ByteLevel, Split(Isolated) and Metaspace pre-tokenizers and the "
                   "Prepend+Replace(\" \"->\"\xE2\x96\x81\") normalizer)");
}

std::string type_of(const json& node, const std::string& origin, const std::string& where) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) {
    throw InputError(origin + ": " + where + " has no \"type\"");
  }
  return node["type"].get<std::string>();
}

bool flag(const json& node, const char* key, bool fallback) {
  return node.contains(key) && node[key].is_boolean() ? node[key].get<bool>() : fallback;
}

std::string string_field(const json& node, const char* key, const std::string& origin,
                         const std::string& where) {
  if (!node.contains(key) || !node[key].is_string()) {
    throw InputError(origin + ": " + where + " lacks the string \"" + key + "\"");
  }
  return node[key].get<std::string>();
}

// Prepend("▁") followed or preceded by Replace(" " -> "▁"): Llama 2 / Mistral files.
void parse_normalizer(const json& node, const std::string& origin, HfBpeSpec* spec) {
  if (node.is_null()) return;
  const std::string type = type_of(node, origin, "normalizer");
  if (type != "Sequence") refuse(origin, "normalizer " + type);
  bool prepend = false, replace = false;
  for (const json& step : node.value("normalizers", json::array())) {
    const std::string step_type = type_of(step, origin, "normalizer");
    if (step_type == "Prepend" && step.value("prepend", "") == kMetaspace) {
      prepend = true;
    } else if (step_type == "Replace" && step.contains("pattern") &&
               step["pattern"].value("String", "") == " " &&
               step.value("content", "") == kMetaspace) {
      replace = true;
    } else {
      refuse(origin, "normalizer " + step_type + " " + step.dump());
    }
  }
  if (!replace) refuse(origin, "normalizer Sequence without Replace(\" \" -> \"\xE2\x96\x81\")");
  spec->metaspace = true;
  spec->prepend = prepend ? MetaspacePrepend::kUnconditional : MetaspacePrepend::kNever;
}

void parse_split(const json& step, const std::string& origin, HfBpeSpec* spec) {
  const std::string behavior = step.value("behavior", "");
  if (behavior != "Isolated") refuse(origin, "pre-tokenizer Split with behavior " + behavior);
  if (flag(step, "invert", false)) refuse(origin, "pre-tokenizer Split with invert");
  const json& pattern = step.contains("pattern") ? step["pattern"] : json();
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    refuse(origin, "pre-tokenizer Split with a non-regex pattern " + pattern.dump());
  }
  spec->split_regexes.push_back(pattern["Regex"].get<std::string>());
}

void parse_metaspace(const json& step, const std::string& origin, HfBpeSpec* spec) {
  if (step.value("replacement", "") != kMetaspace) {
    refuse(origin, "pre-tokenizer Metaspace with replacement " + step.value("replacement", ""));
  }
  spec->metaspace = true;
  spec->metaspace_split = flag(step, "split", true);
  const std::string scheme = step.contains("prepend_scheme")
                                 ? string_field(step, "prepend_scheme", origin, "Metaspace")
                             : flag(step, "add_prefix_space", true) ? "always"
                                                                    : "never";
  if (scheme == "always") {
    spec->prepend = MetaspacePrepend::kAlways;
  } else if (scheme == "first") {
    spec->prepend = MetaspacePrepend::kFirst;
  } else if (scheme == "never") {
    spec->prepend = MetaspacePrepend::kNever;
  } else {
    refuse(origin, "Metaspace prepend_scheme " + scheme);
  }
}

void parse_pre_tokenizer_step(const json& step, const std::string& origin, HfBpeSpec* spec) {
  const std::string type = type_of(step, origin, "pre_tokenizer");
  if (spec->byte_level) refuse(origin, "pre-tokenizer " + type + " after ByteLevel");
  if (type == "Split") {
    parse_split(step, origin, spec);
  } else if (type == "ByteLevel") {
    spec->byte_level = true;
    spec->add_prefix_space = flag(step, "add_prefix_space", false);
    // The prefix space would go in front of every Split piece; no known file does that.
    if (spec->add_prefix_space && !spec->split_regexes.empty()) {
      refuse(origin, "pre-tokenizer ByteLevel with add_prefix_space after Split");
    }
    if (flag(step, "use_regex", true)) spec->split_regexes.push_back(kGpt2Pattern);
  } else if (type == "Metaspace") {
    if (!spec->split_regexes.empty()) refuse(origin, "pre-tokenizer Metaspace after Split");
    parse_metaspace(step, origin, spec);
  } else {
    refuse(origin, "pre-tokenizer " + type);
  }
}

void parse_pre_tokenizer(const json& node, const std::string& origin, HfBpeSpec* spec) {
  if (node.is_null()) return;
  if (type_of(node, origin, "pre_tokenizer") == "Sequence") {
    for (const json& step : node.value("pretokenizers", json::array())) {
      parse_pre_tokenizer_step(step, origin, spec);
    }
  } else {
    parse_pre_tokenizer_step(node, origin, spec);
  }
  if (!spec->split_regexes.empty() && !spec->byte_level) {
    refuse(origin, "pre-tokenizer Split without ByteLevel");
  }
}

std::pair<std::string, std::string> parse_merge(const json& merge, const std::string& origin) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
      return {text.substr(0, space), text.substr(space + 1)};
    }
  }
  throw InputError(origin + ": merge " + merge.dump() + " is neither \"a b\" nor [\"a\", \"b\"]");
}

void parse_model(const json& model, const std::string& origin, HfBpeSpec* spec) {
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") refuse(origin, "model " + (type.empty() ? std::string("(untyped)") : type));
  if (model.contains("dropout") && !model["dropout"].is_null()) refuse(origin, "BPE dropout");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      refuse(origin, std::string("BPE ") + key);
    }
  }
  spec->byte_fallback = flag(model, "byte_fallback", false);
  spec->fuse_unk = flag(model, "fuse_unk", false);
  spec->ignore_merges = flag(model, "ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    spec->unk_token = model["unk_token"].get<std::string>();
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw InputError(origin + ": BPE model has no \"vocab\" object");
  }
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_unsigned()) throw InputError(origin + ": vocab id of '" + token + "'");
    spec->vocab.emplace_back(token, id.get<uint32_t>());
  }
  for (const json& merge : model.value("merges", json::array())) {
    spec->merges.push_back(parse_merge(merge, origin));
  }
}

void parse_added_tokens(const json& list, const std::string& origin, HfBpeSpec* spec) {
  for (const json& token : list) {
    HfAddedToken added{string_field(token, "content", origin, "added token"),
                       token.value("id", uint32_t{0})};
    for (const char* option : {"single_word", "lstrip", "rstrip"}) {
      if (flag(token, option, false)) {
        refuse(origin, "added token '" + added.content + "' with " + option);
      }
    }
    if (flag(token, "normalized", false) && spec->metaspace) {
      refuse(origin, "normalized added token '" + added.content + "' with a normalizer");
    }
    spec->added_tokens.push_back(std::move(added));
  }
}

}  // namespace

HfBpeSpec parse_hf_bpe(const std::string& json_text, const std::string& origin) {
  const json root = json::parse(json_text, nullptr, false);
  if (!root.is_object() || !root.contains("model")) {
    throw InputError(origin + ": not a Hugging Face tokenizer.json (no \"model\" object)");
  }
  HfBpeSpec spec;
  parse_model(root["model"], origin, &spec);
  parse_normalizer(root.value("normalizer", json()), origin, &spec);
  if (spec.metaspace && !root.value("pre_tokenizer", json()).is_null()) {
    refuse(origin, "a pre-tokenizer together with the Replace normalizer");
  }
  parse_pre_tokenizer(root.value("pre_tokenizer", json()), origin, &spec);
  parse_added_tokens(root.value("added_tokens", json::array()), origin, &spec);
  return spec;
}

}  // namespace moelab
