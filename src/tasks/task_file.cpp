#include "tasks/task_file.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/input_stream.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;

std::string items_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / (name + ".jsonl")).string();
}

TaskKind kind_named(const std::string& name, const std::string& where) {
  for (TaskKind kind : {TaskKind::kMultipleChoice, TaskKind::kCloze}) {
    if (name == task_kind_name(kind)) return kind;
  }
  throw InputError(where + ": kind \"" + name + "\": expected multiple_choice or cloze");
}

json item_json(const TaskItem& item) {
  json choices = json::array();
  for (const TaskChoice& c : item.choices) {
    json choice = {{"continuation", c.continuation}, {"chars", c.chars}, {"bytes", c.bytes}};
    if (!c.context.empty()) choice["context"] = c.context;
    choices.push_back(std::move(choice));
  }
  json out = {{"gold", item.gold}, {"context", item.context}, {"choices", std::move(choices)}};
  if (!item.group.empty()) out["group"] = item.group;
  return out;
}

// Token ids below `vocab_size`.
std::vector<int64_t> ids_from(const json& value, int64_t vocab_size, const std::string& where) {
  std::vector<int64_t> ids = value.get<std::vector<int64_t>>();
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      throw InputError(where + ": token id " + std::to_string(id) + " outside the model's " +
                       std::to_string(vocab_size) + "-token vocabulary");
    }
  }
  return ids;
}

TaskItem item_from(const json& line, int64_t vocab_size, const std::string& where) {
  TaskItem item;
  item.gold = line.at("gold").get<int64_t>();
  item.group = line.value("group", "");
  item.context = ids_from(line.at("context"), vocab_size, where);
  for (const json& c : line.at("choices")) {
    TaskChoice choice;
    if (c.contains("context")) choice.context = ids_from(c["context"], vocab_size, where);
    choice.continuation = ids_from(c.at("continuation"), vocab_size, where);
    choice.chars = c.at("chars").get<int64_t>();
    choice.bytes = c.at("bytes").get<int64_t>();
    if (choice.continuation.empty() || choice.chars <= 0 || choice.bytes <= 0) {
      throw InputError(where + ": a choice with an empty continuation");
    }
    item.choices.push_back(std::move(choice));
  }
  if (item.choices.empty() || item.gold < 0 || item.gold >= int64_t(item.choices.size())) {
    throw InputError(where + ": gold " + std::to_string(item.gold) + " is not one of its " +
                     std::to_string(item.choices.size()) + " choices");
  }
  if (item.context.empty()) throw InputError(where + ": an empty context (prep starts it at EOS)");
  return item;
}

}  // namespace

const char* task_kind_name(TaskKind kind) {
  return kind == TaskKind::kCloze ? "cloze" : "multiple_choice";
}

const TaskHeader& PreparedTasks::task(const std::string& name) const {
  std::string names;
  for (const TaskHeader& t : tasks) {
    if (t.name == name) return t;
    names += (names.empty() ? "" : ", ") + t.name;
  }
  throw InputError(dir + "/tasks.json: no task \"" + name + "\" (it has " + names + ")");
}

void write_task_items(const std::string& dir, const TaskHeader& header,
                      const std::vector<TaskItem>& items) {
  std::string text;
  for (const TaskItem& item : items) text += item_json(item).dump() + "\n";
  write_file_atomically(items_path(dir, header.name), text);
}

void write_prepared_tasks(const PreparedTasks& tasks) {
  json list = json::array();
  for (const TaskHeader& t : tasks.tasks) {
    list.push_back({{"name", t.name},
                    {"kind", task_kind_name(t.kind)},
                    {"source", t.source},
                    {"source_checksum", t.source_checksum},
                    {"items", t.items}});
  }
  const json manifest = {{"format", kFormat},
                         {"tokenizer", tasks.tokenizer},
                         {"tokenizer_checksum", tasks.tokenizer_checksum},
                         {"eos_id", tasks.eos_id},
                         {"tasks", list}};
  write_file_atomically(tasks.dir + "/tasks.json", manifest.dump(2) + "\n");
}

PreparedTasks read_prepared_tasks(const std::string& dir) {
  const std::string path = dir + "/tasks.json";
  const json manifest =
      json::parse(read_text_file(path, "prepared tasks (moelab tasks prep --out)"), nullptr, false);
  if (!manifest.is_object() || manifest.value("format", 0) != kFormat) {
    throw InputError(path + ": not a prepared task manifest of format " + std::to_string(kFormat));
  }
  try {
    PreparedTasks tasks;
    tasks.dir = dir;
    tasks.tokenizer = manifest.at("tokenizer").get<std::string>();
    tasks.tokenizer_checksum = manifest.at("tokenizer_checksum").get<std::string>();
    tasks.eos_id = manifest.at("eos_id").get<int64_t>();
    for (const json& t : manifest.at("tasks")) {
      TaskHeader header;
      header.name = t.at("name").get<std::string>();
      header.kind = kind_named(t.at("kind").get<std::string>(), path);
      header.source = t.at("source").get<std::string>();
      header.source_checksum = t.at("source_checksum").get<std::string>();
      header.items = t.at("items").get<int64_t>();
      tasks.tasks.push_back(std::move(header));
    }
    return tasks;
  } catch (const json::exception& e) {
    throw InputError(path + ": " + e.what());
  }
}

std::vector<TaskItem> read_task_items(const PreparedTasks& tasks, const std::string& name,
                                      int64_t limit, int64_t vocab_size) {
  const TaskHeader& header = tasks.task(name);
  const std::string path = items_path(tasks.dir, name);
  const int64_t wanted = limit > 0 ? std::min(limit, header.items) : header.items;
  std::vector<TaskItem> items;
  LineReader lines(path);
  std::string line;
  while (int64_t(items.size()) < wanted && lines.next(&line)) {
    const std::string where = path + ":" + std::to_string(lines.line_number());
    const json parsed = json::parse(line, nullptr, false);
    try {
      items.push_back(item_from(parsed, vocab_size, where));
    } catch (const json::exception& e) {
      throw InputError(where + ": " + e.what());
    }
  }
  if (int64_t(items.size()) < wanted) {
    throw InputError(path + ": " + std::to_string(items.size()) + " items, but tasks.json says " +
                     std::to_string(header.items));
  }
  return items;
}

void check_task_tokenizer(const PreparedTasks& tasks, const std::string& checksum,
                          const std::string& data_dir) {
  if (tasks.tokenizer_checksum == checksum) return;
  throw InputError(tasks.dir + "/tasks.json: tokenized by " + tasks.tokenizer + " (checksum " +
                   tasks.tokenizer_checksum + "), but the model's data " + data_dir +
                   " by another tokenizer (checksum " + checksum +
                   "): prepare the tasks with --tokenizer " + data_dir);
}

}  // namespace moelab
