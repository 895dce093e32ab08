// The downstream tasks a run or `moelab eval` scores: each a prepared task
// (tasks/task_file.h) read once, checked against the model's tokenizer, and
// scored by task_scorer.h into task_metrics.h's numbers.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "model/transformer.h"
#include "tasks/task_file.h"
#include "tasks/task_metrics.h"
#include "train/task_result.h"
#include "train/task_scorer.h"

namespace moelab {

class TaskSuite {
 public:
  // Reads each task's first `limit` items; InputError naming the task folder
  // when it was tokenized by another tokenizer than `tokenizer_checksum`, that
  // of the model's training data `data_dir`.
  TaskSuite(const std::vector<EvalTask>& tasks, int64_t vocab_size,
            const std::string& tokenizer_checksum, const std::string& data_dir);

  size_t size() const { return tasks_.size(); }
  const EvalTask& spec(size_t task) const { return tasks_[task].spec; }
  TaskKind kind(size_t task) const { return tasks_[task].kind; }
  // "task/<name>/<metric>" for each task and its column metrics, in order.
  std::vector<std::string> column_names() const;
  int64_t pad_id() const { return pad_id_; }

  // Collective over `dp`: every rank scores its share, all get the result.
  TaskResult score(size_t task, Transformer& model, const TaskBatching& batching, Communicator* dp,
                   const torch::Device& device) const;

 private:
  struct Loaded {
    EvalTask spec;
    TaskKind kind;
    std::vector<TaskItem> items;
  };
  std::vector<Loaded> tasks_;
  int64_t pad_id_ = 0;
};

}  // namespace moelab
