// Validation loss: the exact token-weighted mean of the language-model loss
// (no auxiliary losses) over the fixed validation windows, whatever the number
// of ranks. Windows are split evenly over data-parallel ranks; every rank runs
// the same number of forward passes (MoE layers exchange tokens collectively),
// padding with zero-weight batches where it has fewer windows.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "comm/communicator.h"
#include "data/validation_set.h"
#include "model/transformer.h"

namespace moelab {

// Evaluation mode while in scope: no training statistics (the aux-free
// routing load) are gathered from evaluation batches.
class EvalModeScope {
 public:
  explicit EvalModeScope(Transformer& model) : model_(model), was_training_(model->is_training()) {
    model_->eval();
  }
  ~EvalModeScope() { model_->train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  Transformer& model_;
  bool was_training_;
};

struct EvalResult {
  double loss = 0;
  int64_t tokens = 0;
};

// One forward pass's windows [n, seq_len + 1] on the device; `padding` when
// this rank is out of windows and joins the pass with one window to ignore.
using EvalBatch = std::function<void(const torch::Tensor& windows, bool padding)>;

// Calls `batch` for each of this rank's passes over the validation windows,
// split evenly over the data-parallel ranks, every rank the same number of
// passes (in evaluation mode, without gradients).
void for_each_eval_batch(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                         Communicator* dp, const torch::Device& device, const EvalBatch& batch);

EvalResult evaluate(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                    Communicator* dp, const torch::Device& device);

}  // namespace moelab
