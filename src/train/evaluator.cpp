#include "train/evaluator.h"

#include <algorithm>

#include "comm/watchdog.h"

namespace moelab {

void for_each_eval_batch(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                         Communicator* dp, const torch::Device& device, const EvalBatch& batch) {
  torch::NoGradGuard no_grad;
  EvalModeScope eval_mode(model);
  const int rank = dp ? dp->rank() : 0;
  const int ranks = dp ? dp->size() : 1;
  const int64_t n = val.size();
  const int64_t begin = n * rank / ranks;
  const int64_t end = n * (rank + 1) / ranks;
  const int64_t most = (n + ranks - 1) / ranks;  // windows on the busiest rank
  const int64_t passes = (most + batch_seqs - 1) / batch_seqs;
  LongPhase phase(WorkPhase::kEvaluation);  // peers wait for the slowest rank's passes
  for (int64_t p = 0; p < passes; ++p) {
    LongPhase::progress();
    const int64_t lo = begin + p * batch_seqs;
    const int64_t hi = std::min(end, lo + batch_seqs);
    // A rank out of windows still joins the pass with one window, weighted 0.
    const bool padding = lo >= hi;
    batch((padding ? val.windows(0, 1) : val.windows(lo, hi)).to(device), padding);
  }
}

EvalResult evaluate(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                    Communicator* dp, const torch::Device& device) {
  // Summed in double so the mean does not depend on how windows are batched;
  // kept on the device so the passes never wait for a read-back.
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
  int64_t tokens = 0;
  for_each_eval_batch(
      model, val, batch_seqs, dp, device, [&](const torch::Tensor& windows, bool padding) {
        auto inputs = windows.narrow(1, 0, windows.size(1) - 1);
        auto targets = windows.narrow(1, 1, windows.size(1) - 1);
        ModelOutput out = model->forward(inputs);
        if (padding) return;
        // fp32 at least (bf16 logits would round the loss); double stays double.
        auto logits =
            out.logits.scalar_type() == torch::kDouble ? out.logits : out.logits.to(torch::kFloat);
        auto per_token = torch::nn::functional::cross_entropy(
            logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
        loss_sum.add_(per_token.to(torch::kDouble).sum());
        tokens += targets.numel();
      });
  auto totals = torch::stack({loss_sum, torch::full({}, double(tokens), loss_sum.options())});
  if (dp && dp->size() > 1) dp->all_reduce_sum(totals);
  totals = totals.cpu();
  EvalResult r;
  r.tokens = int64_t(totals[1].item<double>());
  r.loss = totals[0].item<double>() / double(r.tokens);
  return r;
}

}  // namespace moelab
