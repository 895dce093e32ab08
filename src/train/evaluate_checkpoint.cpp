#include "train/evaluate_checkpoint.h"

#include "checkpoint/checkpoint_io.h"
#include "comm/cuda_device.h"
#include "comm/process_groups.h"
#include "config/data_sets.h"
#include "config/load.h"
#include "data/validation_set.h"
#include "model/transformer.h"
#include "train/evaluator.h"
#include "util/error.h"

namespace moelab {

EvalCheckpointResult evaluate_checkpoint(const EvalCheckpointOptions& opts) {
  LoadedCheckpoint ckpt = load_checkpoint(opts.checkpoint);
  if (!ckpt.meta.contains("config") || !ckpt.meta["config"].is_string()) {
    throw InputError(opts.checkpoint +
                     "/meta.json: no \"config\" entry; not a moelab run checkpoint");
  }
  Config cfg = parse_config(ckpt.meta["config"].get<std::string>(), opts.checkpoint + "/meta.json",
                            {"parallel.ep=1", "checkpoint.resume=none"});
  // The run's first validation set unless the options name another.
  const EvalSet first = validation_sets(cfg).front();
  const std::string dir = opts.data_dir.empty() ? first.dir : opts.data_dir;
  const std::string split = opts.split.empty() ? first.split : opts.split;

  ProcessGroups groups = make_process_groups(cfg);
  ValidationSet val(dir, split, cfg.model.seq_len, opts.max_windows);
  check_vocab_matches(val.info(), cfg.model.vocab_size);

  Transformer model(model_settings(cfg));
  torch::NoGradGuard no_grad;
  // Parameters and buffers (routing biases steer which experts evaluate).
  auto tensors = model->named_weights();
  for (auto& nb : model->named_buffers()) tensors.insert(nb.key(), nb.value());
  for (auto& np : tensors) {
    auto it = ckpt.tensors.find(np.key());
    if (it == ckpt.tensors.end() || it->second.sizes() != np.value().sizes()) {
      throw InputError(opts.checkpoint + ": tensor '" + np.key() +
                       "' is missing or has another shape than the model built from its config");
    }
    np.value().copy_(it->second);
  }
  const torch::Device device = run_device(cfg);
  model->to(device);
  EvalResult r = evaluate(model, val, opts.batch_seqs, groups.dp.get(), device);
  return {ckpt.step, split, r.loss, r.tokens};
}

}  // namespace moelab
