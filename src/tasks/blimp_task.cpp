#include "tasks/blimp_task.h"

#include <map>
#include <nlohmann/json.hpp>

#include "data/input_stream.h"
#include "util/error.h"

namespace moelab {

TaskText read_blimp(const std::string& path) {
  std::map<std::string, std::vector<TextItem>> paradigms;
  std::vector<std::string> order;  // of first appearance
  LineReader lines(path);
  std::string line;
  while (lines.next(&line)) {
    try {
      const auto pair = nlohmann::json::parse(line);
      const std::string uid = pair.at("UID").get<std::string>();
      if (!paradigms.count(uid)) order.push_back(uid);
      paradigms[uid].push_back({"",
                                {{"", pair.at("sentence_good").get<std::string>()},
                                 {"", pair.at("sentence_bad").get<std::string>()}},
                                0,
                                uid});
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path + ":" + std::to_string(lines.line_number()) + ": " + e.what());
    }
  }
  if (order.empty()) throw InputError(path + ": no minimal pairs");
  TaskText task;
  task.source = path;
  for (size_t i = 0;; ++i) {
    const size_t before = task.items.size();
    for (const std::string& uid : order) {
      if (i < paradigms[uid].size()) task.items.push_back(paradigms[uid][i]);
    }
    if (task.items.size() == before) break;
  }
  return task;
}

}  // namespace moelab
