#include "tasks/task_prep.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <unordered_map>

#include "util/error.h"

namespace moelab {
namespace {

// Every distinct text of the task encoded once (without the EOS that
// encode_documents appends).
std::unordered_map<std::string, std::vector<int64_t>> encode_texts(const TaskText& task,
                                                                   const Tokenizer& tokenizer) {
  std::unordered_map<std::string, std::vector<int64_t>> ids;
  std::vector<std::string> texts;
  auto add = [&](const std::string& text) {
    if (!text.empty() && ids.emplace(text, std::vector<int64_t>{}).second) texts.push_back(text);
  };
  for (const TextItem& item : task.items) {
    add(item.context);
    for (const TextChoice& c : item.choices) {
      add(c.context);
      add(c.continuation);
    }
  }
  const auto encoded = tokenizer.encode_documents(texts);
  for (size_t i = 0; i < texts.size(); ++i) {
    ids[texts[i]].assign(encoded[i].begin(), encoded[i].end() - 1);
  }
  return ids;
}

Tokenizer tokenizer_from(const std::string& path) {
  if (std::filesystem::is_directory(path)) return Tokenizer::from_dataset(path);
  return Tokenizer::from_file(path);
}

}  // namespace

int64_t code_points(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<TaskItem> tokenize_task(const TaskText& task, const Tokenizer& tokenizer) {
  const auto ids = encode_texts(task, tokenizer);
  auto context = [&](const std::string& text) {
    std::vector<int64_t> out = {tokenizer.eos_id()};
    if (!text.empty()) out.insert(out.end(), ids.at(text).begin(), ids.at(text).end());
    return out;
  };
  std::vector<TaskItem> items;
  for (const TextItem& text : task.items) {
    TaskItem item;
    item.context = context(text.context);
    item.gold = text.gold;
    item.group = text.group;
    for (const TextChoice& c : text.choices) {
      const auto& continuation = ids.at(c.continuation);
      if (continuation.empty()) {
        throw InputError(task.source + ": the continuation \"" + c.continuation +
                         "\" encodes to no tokens");
      }
      item.choices.push_back({c.context.empty() ? std::vector<int64_t>{} : context(c.context),
                              continuation, code_points(c.continuation),
                              int64_t(c.continuation.size())});
    }
    items.push_back(std::move(item));
  }
  return items;
}

PreparedTasks prep_tasks(const TaskPrepOptions& options) {
  if (options.tasks.empty()) throw InputError("tasks prep: no --tasks given");
  const Tokenizer tokenizer = tokenizer_from(options.tokenizer);
  PreparedTasks prepared;
  prepared.dir = options.out;
  prepared.tokenizer = options.tokenizer;
  prepared.tokenizer_checksum = tokenizer.checksum();
  prepared.eos_id = tokenizer.eos_id();
  std::filesystem::create_directories(options.out);
  for (const std::string& name : options.tasks) {
    const TaskText text = load_task_text(name, options.sources);
    const std::vector<TaskItem> items = tokenize_task(text, tokenizer);
    TaskHeader header{name, text.kind, text.source, task_text_checksum(text),
                      int64_t(items.size())};
    write_task_items(options.out, header, items);
    prepared.tasks.push_back(std::move(header));
    spdlog::info("task {}: {} items ({}) from {}", name, items.size(), task_kind_name(text.kind),
                 text.source);
  }
  write_prepared_tasks(prepared);
  return prepared;
}

}  // namespace moelab
