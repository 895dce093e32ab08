#include "tasks/task_metrics.h"

#include <algorithm>
#include <cmath>

namespace moelab {
namespace {

// The index of the first largest LL_c / norm(c).
template <typename Norm>
int64_t best_choice(const std::vector<ChoiceScore>& scores, Norm norm) {
  int64_t best = 0;
  for (size_t c = 1; c < scores.size(); ++c) {
    if (scores[c].loglik / norm(c) > scores[size_t(best)].loglik / norm(size_t(best))) {
      best = int64_t(c);
    }
  }
  return best;
}

struct ItemMetrics {
  double acc = 0, len_norm = 0, tok_norm = 0, bpb = 0;
};

ItemMetrics item_metrics(TaskKind kind, const TaskItem& item,
                         const std::vector<ChoiceScore>& scores) {
  const auto& gold = item.choices[size_t(item.gold)];
  ItemMetrics m;
  m.bpb = -scores[size_t(item.gold)].loglik / (double(gold.bytes) * std::log(2.0));
  if (kind == TaskKind::kCloze) {
    m.acc = scores[size_t(item.gold)].greedy;
    return m;
  }
  const auto& choices = item.choices;
  m.acc = best_choice(scores, [](size_t) { return 1.0; }) == item.gold;
  m.len_norm = best_choice(scores, [&](size_t c) { return double(choices[c].chars); }) == item.gold;
  m.tok_norm = best_choice(scores, [&](size_t c) {
                 return double(choices[c].continuation.size());
               }) == item.gold;
  return m;
}

}  // namespace

std::vector<std::string> task_column_metrics(TaskKind kind) {
  if (kind == TaskKind::kCloze) return {"acc", "bpb"};
  return {"acc", "len_norm", "bpb"};
}

TaskScores score_task(TaskKind kind, const std::vector<TaskItem>& items,
                      const std::vector<std::vector<ChoiceScore>>& scores) {
  TaskScores out;
  out.items = int64_t(items.size());
  ItemMetrics sum;
  std::map<std::string, std::pair<double, int64_t>> groups;  // right, items
  for (size_t i = 0; i < items.size(); ++i) {
    const ItemMetrics m = item_metrics(kind, items[i], scores[i]);
    sum.acc += m.acc;
    sum.len_norm += m.len_norm;
    sum.tok_norm += m.tok_norm;
    sum.bpb += m.bpb;
    if (!items[i].group.empty()) {
      groups[items[i].group].first += m.acc;
      groups[items[i].group].second += 1;
    }
  }
  const double n = double(std::max<int64_t>(out.items, 1));
  out.metrics["acc"] = sum.acc / n;
  out.metrics["bpb"] = sum.bpb / n;
  if (kind == TaskKind::kMultipleChoice) {
    out.metrics["len_norm"] = sum.len_norm / n;
    out.metrics["tok_norm"] = sum.tok_norm / n;
  }
  for (const auto& [group, counts] : groups) {
    out.group_acc[group] = counts.first / double(counts.second);
  }
  return out;
}

}  // namespace moelab
