#include "tasks/tinystories_cloze.h"

#include <cctype>

#include "data/input_stream.h"
#include "util/error.h"

namespace moelab {
namespace {

constexpr int kMinWords = 40;

bool is_letter(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

// Whole-word occurrences of `word` in `text`.
bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !is_letter(text[at - 1]);
    const size_t end = at + word.size();
    if (starts && (end == text.size() || !is_letter(text[end]))) return true;
  }
  return false;
}

int words_in(const std::string& text) {
  int words = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    words += !std::isspace(static_cast<unsigned char>(text[i])) &&
             (i == 0 || std::isspace(static_cast<unsigned char>(text[i - 1])));
  }
  return words;
}

// The story's cloze item, or false when the story does not make one.
bool cloze_of(const std::string& story, TextItem* item) {
  size_t end = story.size();
  while (end > 0 && !is_letter(story[end - 1])) {
    const unsigned char c = static_cast<unsigned char>(story[end - 1]);
    if (!std::ispunct(c) && !std::isspace(c)) return false;
    --end;
  }
  size_t begin = end;
  while (begin > 0 && is_letter(story[begin - 1])) --begin;
  if (begin == 0 || end - begin < 2 || story[begin - 1] != ' ') return false;
  const std::string word = story.substr(begin, end - begin);
  std::string context = story.substr(0, begin - 1);
  if (words_in(story) < kMinWords || !has_word(context, word)) return false;
  *item = {std::move(context), {{"", " " + word}}, 0, ""};
  return true;
}

}  // namespace

TaskText build_tinystories_cloze(const std::string& valid_text_path) {
  TaskText task;
  task.kind = TaskKind::kCloze;
  task.source = valid_text_path + " (tinystories_cloze v1)";
  LineReader lines(valid_text_path);
  std::string line, story;
  auto close_story = [&] {
    const size_t first = story.find_first_not_of(" \n");
    const size_t last = story.find_last_not_of(" \n");
    TextItem item;
    if (first != std::string::npos && cloze_of(story.substr(first, last + 1 - first), &item)) {
      task.items.push_back(std::move(item));
    }
    story.clear();
  };
  while (lines.next(&line)) {
    if (line == "<|endoftext|>") {
      close_story();
    } else {
      story += (story.empty() ? "" : "\n") + line;
    }
  }
  close_story();
  if (task.items.empty()) throw InputError(valid_text_path + ": no story makes a cloze item");
  return task;
}

}  // namespace moelab
