#include "train/task_scorer.h"

#include <algorithm>
#include <numeric>

#include "train/evaluator.h"
#include "util/error.h"

namespace moelab {
namespace {

// One choice as the model reads it: the input (context and continuation but
// its last token, left-truncated to seq_len) whose last `continuation` positions
// predict the continuation.
struct Row {
  size_t item = 0, choice = 0;
  std::vector<int64_t> input;
  std::vector<int64_t> continuation;
};

std::vector<Row> rows_of(const std::vector<TaskItem>& items, int64_t seq_len,
                         const std::string& task) {
  std::vector<Row> rows;
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t c = 0; c < items[i].choices.size(); ++c) {
      const auto& context = items[i].context_of(c);
      const auto& continuation = items[i].choices[c].continuation;
      if (int64_t(continuation.size()) > seq_len) {
        throw InputError("task " + task + ": item " + std::to_string(i) + " choice " +
                         std::to_string(c) + " has a continuation of " +
                         std::to_string(continuation.size()) + " tokens, more than the model's " +
                         std::to_string(seq_len) + "-token sequence");
      }
      std::vector<int64_t> tokens = context;
      tokens.insert(tokens.end(), continuation.begin(), continuation.end() - 1);
      const size_t cut = tokens.size() > size_t(seq_len) ? tokens.size() - size_t(seq_len) : 0;
      rows.push_back({i, c, {tokens.begin() + cut, tokens.end()}, continuation});
    }
  }
  return rows;
}

// A rank's forward passes, each a list of row indices, longest first.
using Passes = std::vector<std::vector<size_t>>;

// Each rank's passes. Rows are sorted by length and dealt round-robin, so
// ranks get equal work and each pass pads little.
std::vector<Passes> passes_per_rank(const std::vector<Row>& rows, const TaskBatching& batching,
                                    int ranks) {
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].input.size() > rows[b].input.size(); });
  const size_t budget = size_t(batching.batch_seqs * batching.seq_len);
  std::vector<Passes> passes(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto& mine = passes[size_t(r)];
    for (size_t k = size_t(r); k < order.size(); k += size_t(ranks)) {
      const size_t row = order[k];
      if (mine.empty() ||
          (mine.back().size() + 1) * rows[mine.back().front()].input.size() > budget) {
        mine.emplace_back();
      }
      mine.back().push_back(row);
    }
  }
  return passes;
}

// Adds each row's log-likelihood and count of non-greedy tokens into
// `totals` ([rows, 2], double) from one forward pass over `batch`.
void score_pass(Transformer& model, const std::vector<Row>& rows, const std::vector<size_t>& batch,
                const TaskBatching& batching, const torch::Device& device, torch::Tensor& totals) {
  const int64_t length = int64_t(rows[batch.front()].input.size());
  std::vector<int64_t> input(batch.size() * size_t(length), batching.pad_id);
  std::vector<int64_t> positions, targets, row_ids;
  for (size_t b = 0; b < batch.size(); ++b) {
    const Row& row = rows[batch[b]];
    std::copy(row.input.begin(), row.input.end(), input.begin() + int64_t(b) * length);
    const int64_t first = int64_t(row.input.size() - row.continuation.size());
    for (size_t t = 0; t < row.continuation.size(); ++t) {
      positions.push_back(int64_t(b) * length + first + int64_t(t));
      targets.push_back(row.continuation[t]);
      row_ids.push_back(int64_t(batch[b]));
    }
  }
  auto to_device = [&](std::vector<int64_t>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kInt64).to(device);
  };
  const auto logits = model->forward(to_device(input, {int64_t(batch.size()), length})).logits;
  const auto picked = logits.reshape({-1, logits.size(-1)})
                          .index_select(0, to_device(positions, {int64_t(positions.size())}));
  // fp32 at least (bf16 logits would round the log-probabilities); double stays double.
  const auto scores = picked.scalar_type() == torch::kDouble ? picked : picked.to(torch::kFloat);
  const auto target = to_device(targets, {int64_t(targets.size())});
  const auto logprob = torch::log_softmax(scores, -1).gather(1, target.unsqueeze(1)).squeeze(1);
  const auto missed = scores.argmax(-1).ne(target);
  const auto per_token = torch::stack({logprob.to(torch::kDouble), missed.to(torch::kDouble)}, 1);
  totals.index_add_(0, to_device(row_ids, {int64_t(row_ids.size())}), per_token);
}

}  // namespace

ScoredChoices score_choices(Transformer& model, const std::vector<TaskItem>& items,
                            const TaskBatching& batching, Communicator* dp,
                            const torch::Device& device, const std::string& task) {
  torch::NoGradGuard no_grad;
  EvalModeScope eval_mode(model);
  const int rank = dp ? dp->rank() : 0;
  const int ranks = dp ? dp->size() : 1;
  const std::vector<Row> rows = rows_of(items, batching.seq_len, task);
  const auto passes = passes_per_rank(rows, batching, ranks);
  size_t most = 0;
  for (const auto& p : passes) most = std::max(most, p.size());

  // Row totals, then one more row holding the tokens forwarded.
  auto totals = torch::zeros({int64_t(rows.size()) + 1, 2},
                             torch::TensorOptions(torch::kDouble).device(device));
  const auto& mine = passes[size_t(rank)];
  double tokens = 0;
  for (size_t p = 0; p < most; ++p) {
    if (p < mine.size()) {
      score_pass(model, rows, mine[p], batching, device, totals);
      for (size_t row : mine[p]) tokens += double(rows[row].input.size());
    } else {
      // Out of rows: still join the pass (MoE dispatch is collective), scoring nothing.
      model->forward(torch::full({1, 1}, batching.pad_id, torch::kInt64).to(device));
    }
  }
  totals[int64_t(rows.size())][0].fill_(tokens);
  if (dp && ranks > 1) dp->all_reduce_sum(totals);
  totals = totals.cpu();
  const auto at = totals.accessor<double, 2>();

  ScoredChoices out;
  out.scores.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) out.scores[i].resize(items[i].choices.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    out.scores[rows[r].item][rows[r].choice] = {at[int64_t(r)][0], at[int64_t(r)][1] == 0};
  }
  out.tokens = int64_t(at[int64_t(rows.size())][0]);
  return out;
}

}  // namespace moelab
