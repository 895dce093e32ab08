// A prepared task folder (`moelab tasks prep --out DIR`): each task's requests
// tokenized once, read by every evaluation. DIR/tasks.json names the tokenizer
// (its checksum, so another tokenizer's model is refused) and each task;
// DIR/<task>.jsonl holds one item a line:
//   {"gold": 1, "group": "...", "context": [ids],
//    "choices": [{"continuation": [ids], "chars": 5, "bytes": 5}, ...]}
// A choice may carry its own "context" (WinoGrande's partial scoring). Every
// context starts with the tokenizer's EOS: the document boundary the model
// saw before each training document (lm-evaluation-harness's prefix token).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// How a task's items are scored (task_metrics.h).
enum class TaskKind {
  kMultipleChoice,  // rank the choices by log-likelihood; gold is one of them
  kCloze,           // one continuation: is it the greedy one, and its bits per byte
};

const char* task_kind_name(TaskKind kind);

struct TaskChoice {
  std::vector<int64_t> context;  // empty: the item's context
  std::vector<int64_t> continuation;
  int64_t chars = 0;  // Unicode code points of the continuation text (leading space included)
  int64_t bytes = 0;  // its UTF-8 bytes
};

struct TaskItem {
  std::vector<int64_t> context;
  std::vector<TaskChoice> choices;
  int64_t gold = 0;
  std::string group;  // a sub-task the JSON breaks scores down by (BLiMP's paradigm)

  const std::vector<int64_t>& context_of(size_t choice) const {
    return choices[choice].context.empty() ? context : choices[choice].context;
  }
};

struct TaskHeader {
  std::string name;
  TaskKind kind = TaskKind::kMultipleChoice;
  std::string source;           // where its text came from (file, version)
  std::string source_checksum;  // xxhash64 of the items' text before tokenizing
  int64_t items = 0;
};

struct PreparedTasks {
  std::string dir;
  std::string tokenizer;  // what prep was given (a dataset folder or tokenizer file)
  std::string tokenizer_checksum;
  int64_t eos_id = 0;
  std::vector<TaskHeader> tasks;

  // The task named `name`; InputError naming the folder and the tasks it has.
  const TaskHeader& task(const std::string& name) const;
};

// Writes DIR/<task>.jsonl for each task and then DIR/tasks.json, atomically.
void write_task_items(const std::string& dir, const TaskHeader& header,
                      const std::vector<TaskItem>& items);
void write_prepared_tasks(const PreparedTasks& tasks);

// Reads DIR/tasks.json; InputError naming the file and field when it is not one.
PreparedTasks read_prepared_tasks(const std::string& dir);
// The first `limit` items of a task (0 = all), checked against the header and
// the vocabulary: InputError naming the file and line otherwise.
std::vector<TaskItem> read_task_items(const PreparedTasks& tasks, const std::string& name,
                                      int64_t limit, int64_t vocab_size);

// InputError unless the tasks were tokenized by the tokenizer with `checksum`
// (that of the model's training data in `data_dir`).
void check_task_tokenizer(const PreparedTasks& tasks, const std::string& checksum,
                          const std::string& data_dir);

}  // namespace moelab
