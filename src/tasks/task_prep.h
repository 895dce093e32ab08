// `moelab tasks prep`: each named task's requests tokenized once into a
// prepared task folder (task_file.h), with the tokenizer's checksum.
#pragma once

#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "tasks/task_file.h"
#include "tasks/task_registry.h"
#include "tasks/task_text.h"

namespace moelab {

struct TaskPrepOptions {
  std::string tokenizer;  // a prepared dataset folder, or a tokenizer file
  std::vector<std::string> tasks;
  std::string out;
  TaskSources sources;
};

// Each context as EOS then its ids, each continuation's ids on their own
// (olmo_eval's ICL tasks tokenize them apart), and its length in code points
// and in UTF-8 bytes.
std::vector<TaskItem> tokenize_task(const TaskText& task, const Tokenizer& tokenizer);

// Unicode code points in UTF-8 `text` (Python's len).
int64_t code_points(const std::string& text);

PreparedTasks prep_tasks(const TaskPrepOptions& options);

}  // namespace moelab
