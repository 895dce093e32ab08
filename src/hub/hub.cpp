#include "hub/hub.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/run_start.h"
#include "config/load.h"
#include "hub/hf_config.h"
#include "hub/hf_weights.h"
#include "hub/tensor_names.h"
#include "hub/tokenizer_files.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

json read_json_file(const std::string& path, const char* what) {
  try {
    return json::parse(read_text_file(path, what));
  } catch (const json::exception& e) {
    throw InputError(path + ": not JSON (" + e.what() + ")");
  }
}

Config checkpoint_config(const LoadedCheckpoint& ckpt, const std::string& checkpoint) {
  if (!ckpt.meta.contains("config")) {
    throw InputError(checkpoint + "/meta.json: no \"config\" entry; not a moelab checkpoint");
  }
  return parse_config(ckpt.meta["config"].get<std::string>(), checkpoint + "/meta.json",
                      {"parallel.ep=1", "checkpoint.resume=none"});
}

void require_shape(const std::map<std::string, std::vector<int64_t>>& shapes,
                   const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& where) {
  const auto it = shapes.find(name);
  if (it == shapes.end() || it->second != shape) {
    throw InputError(where + ": tensor '" + name + "' is missing or has another shape than " +
                     c10::str(c10::IntArrayRef(shape)));
  }
}

// DeepSeek-V3's multi-token prediction layers, model.layers.N.. after the
// num_hidden_layers N: transformers computes without them, and moelab's MTP
// modules have another structure (docs/moe.md), so import leaves them out.
int64_t mtp_layer_count(const json& j, const HubFamily& family, const std::string& path) {
  if (!family.mtp_key || !j.contains("num_nextn_predict_layers")) return 0;
  if (!j["num_nextn_predict_layers"].is_number_integer()) {
    throw InputError(path + ": \"num_nextn_predict_layers\" has the wrong type");
  }
  return j["num_nextn_predict_layers"].get<int64_t>();
}

bool in_mtp_layers(const std::string& name, int64_t n_layers, int64_t mtp_layers) {
  for (int64_t i = 0; i < mtp_layers; ++i) {
    if (name.rfind("model.layers." + std::to_string(n_layers + i) + ".", 0) == 0) return true;
  }
  return false;
}

// Every Hugging Face tensor is linked to moelab's or one that must be zero;
// the rest (lm_head.weight beside tied embeddings, and the MTP layers,
// counted) would be dropped, so they are refused. Checked on the headers,
// before any tensor is read.
int64_t check_tensor_names(const HfWeights& weights, const HfTensorMap& map, const Config& cfg,
                           const HubFamily& family, const std::string& hf_dir, int64_t mtp_layers) {
  std::set<std::string> used;
  for (const auto& link : map.links) {
    require_shape(weights.shapes(), link.theirs, link.shape, hf_dir);
    used.insert(link.theirs);
  }
  for (const auto& zero : map.zeros) {
    require_shape(weights.shapes(), zero.theirs, zero.shape, hf_dir);
    used.insert(zero.theirs);
  }
  if (cfg.model.tie_embeddings) used.insert("lm_head.weight");
  int64_t mtp_tensors = 0;
  for (const auto& [name, shape] : weights.shapes()) {
    if (used.count(name)) continue;
    if (in_mtp_layers(name, cfg.model.n_layers, mtp_layers)) {
      ++mtp_tensors;
      continue;
    }
    throw InputError(hf_dir + ": tensor '" + name + "' has no place in moelab's " +
                     family.architecture);
  }
  return mtp_tensors;
}

// The dtype a whole export is recorded as: bfloat16 when every tensor is.
std::string torch_dtype(const std::map<std::string, torch::Tensor>& tensors) {
  for (const auto& [name, t] : tensors) {
    if (t.scalar_type() != torch::kBFloat16 && t.numel() > 0) return "float32";
  }
  return "bfloat16";
}

}  // namespace

void export_hf(const std::string& checkpoint, const std::string& out) {
  const LoadedCheckpoint ckpt = load_checkpoint(checkpoint);
  const Config cfg = checkpoint_config(ckpt, checkpoint);
  const HubFamily& family = export_family(cfg, checkpoint);
  std::map<std::string, torch::Tensor> tensors;
  const HfTensorMap map = hf_tensor_map(cfg, family);
  for (const auto& link : map.links) {
    const auto it = ckpt.tensors.find(link.ours);
    if (it == ckpt.tensors.end() || it->second.sizes() != c10::IntArrayRef(link.shape)) {
      throw InputError(checkpoint + ": tensor '" + link.ours +
                       "' is missing or has another shape than " +
                       c10::str(c10::IntArrayRef(link.shape)));
    }
    tensors[link.theirs] = to_hf(link, it->second);
  }
  const std::string dtype = torch_dtype(tensors);
  for (const auto& zero : map.zeros) {
    tensors[zero.theirs] =
        torch::zeros(zero.shape, dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32);
  }
  if (cfg.train.mtp_depth > 0) {
    spdlog::info(
        "the {} multi-token prediction modules (train.mtp_depth) are not exported: {} "
        "has none",
        cfg.train.mtp_depth, family.architecture);
  }
  std::filesystem::create_directories(out);
  write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}});
  json config = hf_config_json(cfg, family);
  config["torch_dtype"] = dtype;
  write_file_atomically(out + "/config.json", config.dump(2) + "\n");
  spdlog::info("exported {} as {} to {}", checkpoint, family.architecture, out);
  if (!write_hf_tokenizer(cfg.data.dir, out, cfg.model.seq_len)) {
    spdlog::info(
        "no tokenizer written: data.dir = \"{}\" holds none moelab writes for transformers",
        cfg.data.dir);
  }
}

std::string import_hf(const std::string& hf_dir, const std::string& out) {
  const std::string config_path = hf_dir + "/config.json";
  const json j = read_json_file(config_path, "Hugging Face config");
  const HubFamily& family = family_of(j, config_path);
  const Config cfg = config_from_hf(j, family, config_path);
  validate(cfg);
  HfWeights weights(hf_dir, family);
  const HfTensorMap map = hf_tensor_map(cfg, family);
  const int64_t mtp_layers = mtp_layer_count(j, family, config_path);
  const int64_t mtp_tensors = check_tensor_names(weights, map, cfg, family, hf_dir, mtp_layers);
  if (mtp_tensors > 0) {
    spdlog::warn(
        "{}: the {} multi-token prediction layers (model.layers.{}.., {} tensors) are not "
        "imported: moelab's MTP modules are not DeepSeek's (docs/convert.md)",
        hf_dir, mtp_layers, cfg.model.n_layers, mtp_tensors);
  }
  for (const auto& zero : map.zeros) {
    if (weights.read(zero.theirs).count_nonzero().item<int64_t>() != 0) {
      throw InputError(hf_dir + ": tensor '" + zero.theirs + "' is not zero; moelab's " +
                       family.architecture + " has it zero (docs/convert.md)");
    }
  }
  RunStartWriter writer(out, cfg, {{"source", hf_dir}, {"method", "import_hf"}});
  for (const auto& link : map.links) {
    const torch::Tensor t = weights.read(link.theirs);
    writer.add(link.ours, from_hf(link, t));
  }
  spdlog::info("imported {} from {}", family.architecture, hf_dir);
  return writer.commit();
}

}  // namespace moelab
