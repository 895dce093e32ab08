#include "checkpoint/run_start.h"

#include <filesystem>

#include "checkpoint/checkpoint_io.h"
#include "config/load.h"
#include "util/atomic_file.h"

namespace moelab {

RunStartWriter::RunStartWriter(const std::string& out, Config cfg, nlohmann::json provenance)
    : dir_(std::filesystem::absolute(out).lexically_normal().string()),
      cfg_(std::move(cfg)),
      meta_(std::move(provenance)) {
  meta_["weights_only"] = true;
  meta_["config"] = to_toml(cfg_);
  prepare_checkpoint_tmp_dir(dir_, 0);
  weights_ = std::make_unique<TensorFileWriter>(checkpoint_tmp_dir(dir_, 0) + "/weights.h5");
}

RunStartWriter::~RunStartWriter() {
  if (committed_) return;
  weights_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(checkpoint_tmp_dir(dir_, 0), ignored);
}

void RunStartWriter::add(const std::string& name, const torch::Tensor& tensor) {
  weights_->add(name, tensor);
}

std::string RunStartWriter::commit() {
  weights_->commit();
  finalize_checkpoint(dir_, 0, meta_, 0);
  committed_ = true;
  const std::string ckpt = checkpoint_dir(dir_, 0);
  Config cfg = cfg_;
  cfg.train.init_from = ckpt;
  cfg.train.out_dir = dir_ + "/run";
  write_file_atomically(dir_ + "/config.toml", to_toml(cfg));
  return ckpt;
}

std::string write_run_start(const std::string& out, const Config& cfg,
                            const std::map<std::string, torch::Tensor>& weights,
                            const nlohmann::json& provenance) {
  RunStartWriter writer(out, cfg, provenance);
  for (const auto& [name, tensor] : weights) writer.add(name, tensor);
  return writer.commit();
}

}  // namespace moelab
