// A task's requests as text, before tokenizing (task_prep.h): what each task
// source (OLMES request files, Hugging Face Arrow dumps, BLiMP, the TinyStories
// cloze) turns its documents into.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_file.h"

namespace moelab {

struct TextChoice {
  std::string context;  // "" = the item's
  std::string continuation;
};

struct TextItem {
  std::string context;  // "" is allowed: the continuation follows EOS alone (BLiMP)
  std::vector<TextChoice> choices;
  int64_t gold = 0;
  std::string group;
};

struct TaskText {
  TaskKind kind = TaskKind::kMultipleChoice;
  std::string source;  // the file it was read from, and how
  std::vector<TextItem> items;
};

// xxhash64 (hex) of every item's text, gold and group: a fixed task keeps it.
std::string task_text_checksum(const TaskText& task);

}  // namespace moelab
