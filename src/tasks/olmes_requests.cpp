#include "tasks/olmes_requests.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "data/input_stream.h"
#include "util/error.h"

namespace moelab {
namespace {

using nlohmann::json;

constexpr int64_t kUnconditionalDocIds = 1000000;

struct Request {
  int64_t choice = 0;
  json label;
  std::string context, continuation;
};

Request request_from(const json& line, const std::string& where) {
  if (line.value("request_type", "") != "loglikelihood") {
    throw InputError(where + ": request_type \"" + line.value("request_type", "") +
                     "\": only loglikelihood requests are scored");
  }
  return {line.at("idx").get<int64_t>(), line.at("label"),
          line.at("request").at("context").get<std::string>(),
          line.at("request").at("continuation").get<std::string>()};
}

// A document's requests as one item: the gold choice from its label, each
// choice's context kept apart where the contexts differ (WinoGrande).
TextItem item_from(std::vector<Request> requests, const std::string& where) {
  std::sort(requests.begin(), requests.end(),
            [](const Request& a, const Request& b) { return a.choice < b.choice; });
  TextItem item;
  item.context = requests.front().context;
  bool one_context = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].choice != int64_t(i)) {
      throw InputError(where + ": choices are not numbered 0.." +
                       std::to_string(requests.size() - 1));
    }
    one_context = one_context && requests[i].context == item.context;
    item.choices.push_back({requests[i].context, requests[i].continuation});
  }
  if (one_context) {
    for (TextChoice& c : item.choices) c.context.clear();
  } else {
    item.context.clear();
  }
  const json& label = requests.front().label;
  item.gold = requests.size() == 1 ? 0 : label.get<int64_t>();
  if (item.gold < 0 || item.gold >= int64_t(requests.size())) {
    throw InputError(where + ": label " + label.dump() + " is not one of its choices");
  }
  return item;
}

}  // namespace

TaskText read_olmes_requests(const std::string& path) {
  std::map<int64_t, std::vector<Request>> by_doc;
  LineReader lines(path);
  std::string line;
  while (lines.next(&line)) {
    const std::string where = path + ":" + std::to_string(lines.line_number());
    try {
      const json parsed = json::parse(line);
      const int64_t doc = parsed.at("doc_id").get<int64_t>();
      if (doc >= kUnconditionalDocIds) continue;
      by_doc[doc].push_back(request_from(parsed, where));
    } catch (const json::exception& e) {
      throw InputError(where + ": " + e.what());
    }
  }
  if (by_doc.empty()) throw InputError(path + ": no requests");
  TaskText task;
  task.source = path;
  bool all_single = true;
  for (auto& [doc, requests] : by_doc) {
    all_single = all_single && requests.size() == 1;
    task.items.push_back(item_from(std::move(requests), path + ": doc_id " + std::to_string(doc)));
  }
  task.kind = all_single ? TaskKind::kCloze : TaskKind::kMultipleChoice;
  return task;
}

}  // namespace moelab
