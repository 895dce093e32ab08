// The start of a run from given weights (`moelab import`, `upcycle`,
// `convert`): <out>/checkpoints/step_00000000, sealed like a run's checkpoint
// (meta.json holds the config, the provenance and "weights_only": true), and
// <out>/config.toml: the config with train.init_from naming those weights and
// train.out_dir = <out>/run, so `moelab train <out>/config.toml` continues
// from them.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/tensor_file.h"
#include "config/config.h"

namespace moelab {

// Written one tensor at a time (an import never holds the whole model).
class RunStartWriter {
 public:
  RunStartWriter(const std::string& out, Config cfg, nlohmann::json provenance);
  // Uncommitted, the temporary checkpoint folder is removed.
  ~RunStartWriter();
  RunStartWriter(const RunStartWriter&) = delete;
  RunStartWriter& operator=(const RunStartWriter&) = delete;
  void add(const std::string& name, const torch::Tensor& tensor);
  // Seals the weights, writes config.toml and returns the weights' folder.
  std::string commit();

 private:
  std::string dir_;
  Config cfg_;
  nlohmann::json meta_;
  std::unique_ptr<TensorFileWriter> weights_;
  bool committed_ = false;
};

std::string write_run_start(const std::string& out, const Config& cfg,
                            const std::map<std::string, torch::Tensor>& weights,
                            const nlohmann::json& provenance);

}  // namespace moelab
