// Shared by the conversion tests: a model saved as a checkpoint folder, and a
// checkpoint folder loaded into the model its meta.json config describes.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "checkpoint/checkpoint_io.h"
#include "config/load.h"
#include "model/transformer.h"

namespace moelab::testing {

// <run_dir>/checkpoints/step_<step>, holding the model's parameters, its
// buffers (the aux-free routing bias) as the trainer saves them, and its config.
inline std::string save_model_checkpoint(const std::string& run_dir, int64_t step,
                                         Transformer& model, const Config& cfg) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& p : model->named_weights()) tensors[p.key()] = p.value().detach();
  for (const auto& b : model->named_buffers()) tensors[b.key()] = b.value().detach();
  prepare_checkpoint_tmp_dir(run_dir, step);
  write_tensor_file(checkpoint_tmp_dir(run_dir, step) + "/replicated.h5", tensors);
  finalize_checkpoint(run_dir, step, {{"config", to_toml(cfg)}}, 0);
  return checkpoint_dir(run_dir, step);
}

// The model of a checkpoint folder, in eval mode.
inline Transformer load_model_checkpoint(const std::string& dir) {
  const LoadedCheckpoint ckpt = load_checkpoint(dir);
  Transformer model(model_settings(parse_config(ckpt.meta.at("config").get<std::string>(), dir)));
  torch::NoGradGuard no_grad;
  auto tensors = model->named_weights();
  for (auto& nb : model->named_buffers()) tensors.insert(nb.key(), nb.value());
  for (auto& t : tensors) t.value().copy_(ckpt.tensors.at(t.key()));
  model->eval();
  return model;
}

}  // namespace moelab::testing
