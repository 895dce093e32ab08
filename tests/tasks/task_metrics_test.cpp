// The metrics of task_metrics.h on items built so that each definition picks
// another choice than its neighbours would: a metric computed the other way
// (length normalised by tokens where characters are asked, the greedy check
// skipped, bits per byte over the wrong length) fails here.
#include <gtest/gtest.h>

#include <cmath>

#include "tasks/task_metrics.h"

namespace moelab {
namespace {

TaskChoice choice(int64_t tokens, int64_t chars, int64_t bytes) {
  return {{}, std::vector<int64_t>(size_t(tokens), 1), chars, bytes};
}

// Choice 0: 1 token, 10 chars; choice 1: 4 tokens, 20 chars. With LL -4 and
// -6, the sum picks 0, per character 1 (-0.3 > -0.4), per token 1 (-1.5 > -4).
// With LL -2 and -6: per character 0 (-0.2 > -0.3), per token 1 (-1.5 > -2).
TaskItem two_choices(int64_t gold) {
  return {{0}, {choice(1, 10, 12), choice(4, 20, 20)}, gold, ""};
}

TEST(TaskMetrics, LengthNormalisationCountsCharactersNotTokens) {
  const std::vector<TaskItem> items = {two_choices(0)};
  const TaskScores s = score_task(TaskKind::kMultipleChoice, items, {{{-2, false}, {-6, false}}});
  EXPECT_EQ(s.metrics.at("acc"), 1.0);
  EXPECT_EQ(s.metrics.at("len_norm"), 1.0);  // -2/10 beats -6/20
  EXPECT_EQ(s.metrics.at("tok_norm"), 0.0);  // -6/4 beats -2/1
}

TEST(TaskMetrics, AccuracyRanksTheSummedLogLikelihood) {
  const std::vector<TaskItem> items = {two_choices(1), two_choices(1)};
  const TaskScores s = score_task(TaskKind::kMultipleChoice, items,
                                  {{{-4, false}, {-6, false}}, {{-7, false}, {-6, false}}});
  EXPECT_EQ(s.metrics.at("acc"), 0.5);
  EXPECT_EQ(s.metrics.at("len_norm"), 1.0);  // -0.3 > -0.4, and -0.3 > -0.7
}

TEST(TaskMetrics, TiesGoToTheFirstChoice) {
  const std::vector<TaskItem> items = {two_choices(1)};
  const TaskScores s = score_task(TaskKind::kMultipleChoice, items, {{{-5, false}, {-5, false}}});
  EXPECT_EQ(s.metrics.at("acc"), 0.0);
}

TEST(TaskMetrics, BitsPerByteAreTheGoldContinuationsOverItsBytes) {
  const std::vector<TaskItem> items = {two_choices(0), two_choices(1)};
  const TaskScores s = score_task(TaskKind::kMultipleChoice, items,
                                  {{{-3, false}, {-9, false}}, {{-1, false}, {-5, false}}});
  const double want = (3.0 / 12 + 5.0 / 20) / 2 / std::log(2.0);
  EXPECT_NEAR(s.metrics.at("bpb"), want, 1e-12);
}

TEST(TaskMetrics, ClozeAccuracyIsTheGreedyMatchAndGroupsAverageApart) {
  std::vector<TaskItem> items = {{{0}, {choice(2, 5, 5)}, 0, "a"},
                                 {{0}, {choice(2, 5, 5)}, 0, "a"},
                                 {{0}, {choice(2, 5, 5)}, 0, "b"}};
  const TaskScores s =
      score_task(TaskKind::kCloze, items, {{{-0.1, true}}, {{-0.1, false}}, {{-9, true}}});
  EXPECT_NEAR(s.metrics.at("acc"), 2.0 / 3, 1e-12);
  EXPECT_EQ(s.metrics.count("len_norm"), 0u);
  EXPECT_EQ(s.group_acc.at("a"), 0.5);
  EXPECT_EQ(s.group_acc.at("b"), 1.0);
}

}  // namespace
}  // namespace moelab
