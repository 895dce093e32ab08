#include "convert/hf_format.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "config/load.h"
#include "convert/dense_to_moe.h"
#include "convert/hf_config.h"
#include "convert/hf_tensors.h"
#include "convert/hf_tokenizer.h"
#include "convert/safetensors.h"
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

// Fused experts, as transformers 5 holds them in memory and a state_dict
// saved as it is carries them: <layer>.mlp.experts.gate_up_proj [E, 2I, d]
// (gate rows, then up rows) and <layer>.mlp.experts.down_proj [E, d, I],
// split into the per-expert tensors the Hub's folders hold under `prefix`.
void split_fused_experts(std::map<std::string, torch::Tensor>& weights, HfFamily family) {
  static const std::string fused = ".mlp.experts.gate_up_proj";
  const bool mixtral = family == HfFamily::Mixtral;
  std::vector<std::string> layers;
  for (const auto& [name, t] : weights) {
    if (name.size() > fused.size() &&
        name.compare(name.size() - fused.size(), fused.size(), fused) == 0)
      layers.push_back(name.substr(0, name.size() - fused.size()));
  }
  for (const auto& layer : layers) {
    const auto gate_up = weights.at(layer + fused);
    auto down_it = weights.find(layer + ".mlp.experts.down_proj");
    if (down_it == weights.end() || gate_up.dim() != 3 || gate_up.size(1) % 2 != 0) {
      throw InputError(layer + fused + ": expected [experts, 2 * width, hidden] beside " + layer +
                       ".mlp.experts.down_proj");
    }
    const auto down = down_it->second;
    const int64_t width = gate_up.size(1) / 2;
    const std::string prefix = layer + (mixtral ? ".block_sparse_moe.experts." : ".mlp.experts.");
    for (int64_t e = 0; e < gate_up.size(0); ++e) {
      const std::string ex = prefix + std::to_string(e);
      weights[ex + (mixtral ? ".w1.weight" : ".gate_proj.weight")] = gate_up[e].narrow(0, 0, width);
      weights[ex + (mixtral ? ".w3.weight" : ".up_proj.weight")] =
          gate_up[e].narrow(0, width, width);
      weights[ex + (mixtral ? ".w2.weight" : ".down_proj.weight")] = down[e];
    }
    weights.erase(layer + fused);
    weights.erase(down_it);
    if (mixtral && weights.count(layer + ".mlp.gate.weight")) {
      weights[layer + ".block_sparse_moe.gate.weight"] = weights.at(layer + ".mlp.gate.weight");
      weights.erase(layer + ".mlp.gate.weight");
    }
  }
}

Config checkpoint_config(const LoadedCheckpoint& ckpt, const std::string& checkpoint) {
  if (!ckpt.meta.contains("config")) {
    throw InputError(checkpoint + "/meta.json: no \"config\" entry; not a moelab checkpoint");
  }
  return parse_config(ckpt.meta["config"].get<std::string>(), checkpoint + "/meta.json",
                      {"parallel.ep=1", "checkpoint.resume=none"});
}

// moelab's tensor for one link, checked against the shape the config implies.
torch::Tensor linked_tensor(const std::map<std::string, torch::Tensor>& from,
                            const std::string& name, const std::vector<int64_t>& shape,
                            const std::string& where) {
  auto it = from.find(name);
  if (it == from.end() || it->second.sizes() != c10::IntArrayRef(shape)) {
    throw InputError(where + ": tensor '" + name + "' is missing or has another shape than " +
                     c10::str(c10::IntArrayRef(shape)));
  }
  return it->second;
}

// Every Hugging Face tensor is either linked to moelab's or one that must be
// zero; the rest (lm_head.weight beside tied embeddings excepted) would be
// dropped, so they are refused.
TensorMap moelab_tensors(const std::map<std::string, torch::Tensor>& weights, const Config& cfg,
                         HfFamily family, const std::string& hf_dir) {
  const HfTensorMap map = hf_tensor_map(cfg, family);
  std::set<std::string> used;
  TensorMap tensors;
  for (const auto& link : map.links) {
    tensors[link.ours] = linked_tensor(weights, link.theirs, link.shape, hf_dir) / link.scale;
    used.insert(link.theirs);
  }
  for (const auto& zero : map.zeros) {
    if (linked_tensor(weights, zero.theirs, zero.shape, hf_dir).count_nonzero().item<int64_t>()) {
      throw InputError(hf_dir + ": tensor '" + zero.theirs + "' is not zero; moelab's " +
                       hf_architecture(family) + " has it zero (docs/convert.md)");
    }
    used.insert(zero.theirs);
  }
  if (cfg.model.tie_embeddings) used.insert("lm_head.weight");
  for (const auto& [name, t] : weights) {
    if (!used.count(name)) {
      throw InputError(hf_dir + ": tensor '" + name + "' has no place in moelab's " +
                       hf_architecture(family));
    }
  }
  return tensors;
}

}  // namespace

std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(index)) return read_safetensors(dir + "/model.safetensors");
  const json parsed = read_json_file(index, "safetensors index");
  if (!parsed.is_object() || !parsed.contains("weight_map") || !parsed["weight_map"].is_object()) {
    throw InputError(index + ": expected an object with a \"weight_map\" object");
  }
  std::map<std::string, std::set<std::string>> names_by_file;
  for (const auto& [name, file] : parsed["weight_map"].items()) {
    if (!file.is_string())
      throw InputError(index + ": weight_map[\"" + name + "\"] is not a file name");
    names_by_file[file.get<std::string>()].insert(name);
  }
  std::map<std::string, torch::Tensor> all;
  for (const auto& [file, names] : names_by_file) {
    const std::string path = dir + "/" + file;
    for (auto& [name, tensor] : read_safetensors(path)) {
      if (all.count(name))
        throw InputError(path + ": tensor '" + name + "' is in another shard too");
      all[name] = std::move(tensor);
    }
    for (const auto& name : names) {
      if (!all.count(name)) {
        throw InputError(index + ": tensor '" + name + "' is mapped to " + file +
                         ", which lacks it");
      }
    }
  }
  return all;
}

void export_hf(const std::string& checkpoint, const std::string& out) {
  const LoadedCheckpoint ckpt = load_checkpoint(checkpoint);
  const Config cfg = checkpoint_config(ckpt, checkpoint);
  const HfFamily family = export_family(cfg);
  refuse_inexpressible(cfg, family, checkpoint);
  std::map<std::string, torch::Tensor> tensors;
  const HfTensorMap map = hf_tensor_map(cfg, family);
  for (const auto& link : map.links) {
    tensors[link.theirs] =
        linked_tensor(ckpt.tensors, link.ours, link.shape, checkpoint) * link.scale;
  }
  for (const auto& zero : map.zeros) tensors[zero.theirs] = torch::zeros(zero.shape);
  std::filesystem::create_directories(out);
  write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}});
  write_file_atomically(out + "/config.json", hf_config_json(cfg, family).dump(2) + "\n");
  spdlog::info("exported {} as {} to {}", checkpoint, hf_architecture(family), out);
  if (!write_hf_tokenizer(cfg.data.dir, out, cfg.model.seq_len)) {
    spdlog::info(
        "no tokenizer written: data.dir = \"{}\" holds none moelab writes for transformers",
        cfg.data.dir);
  }
}

std::string import_hf(const std::string& hf_dir, const std::string& out) {
  const std::string config_path = hf_dir + "/config.json";
  const json j = read_json_file(config_path, "Hugging Face config");
  const HfFamily family = family_of(j, config_path);
  const Config cfg = config_from_hf(j, family, config_path);
  validate(cfg);
  auto weights = read_hf_weights(hf_dir);
  split_fused_experts(weights, family);
  const TensorMap tensors = moelab_tensors(weights, cfg, family, hf_dir);
  spdlog::info("imported {} from {}", hf_architecture(family), hf_dir);
  return write_run_start(out, cfg, tensors, {{"source", hf_dir}, {"method", "import_hf"}});
}

}  // namespace moelab
