#include "convert/hf_format.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "config/load.h"
#include "convert/dense_to_moe.h"
#include "convert/safetensors.h"
#include "model/transformer.h"
#include "train/checkpoint_io.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

// moelab's name -> the Hugging Face name, for one model's parameters.
std::string hf_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> parts = {
      {".attn_norm.weight", ".input_layernorm.weight"},
      {".ffn_norm.weight", ".post_attention_layernorm.weight"},
      {".attn.wq", ".self_attn.q_proj.weight"},
      {".attn.wk", ".self_attn.k_proj.weight"},
      {".attn.wv", ".self_attn.v_proj.weight"},
      {".attn.wo", ".self_attn.o_proj.weight"},
      {".ffn.w1", ".mlp.gate_proj.weight"},
      {".ffn.w3", ".mlp.up_proj.weight"},
      {".ffn.w2", ".mlp.down_proj.weight"},
      {".moe.router.weight", ".block_sparse_moe.gate.weight"},
  };
  if (name == "embedding") return "model.embed_tokens.weight";
  if (name == "head") return "lm_head.weight";
  if (name == "final_norm.weight") return "model.norm.weight";
  for (const auto& [from, to] : parts) {
    const size_t at = name.find(from);
    if (at != std::string::npos && at + from.size() == name.size()) {
      return "model." + name.substr(0, at) + to;
    }
  }
  // layers.<l>.moe.experts.<e>.w1 -> model.layers.<l>.block_sparse_moe.experts.<e>.w1.weight
  const size_t at = name.find(".moe.experts.");
  if (at != std::string::npos) {
    return "model." + name.substr(0, at) + ".block_sparse_moe.experts." +
           name.substr(at + std::string(".moe.experts.").size()) + ".weight";
  }
  throw std::logic_error("hf_name: no Hugging Face name for '" + name + "'");
}

void refuse_unless(bool ok, const std::string& checkpoint, const std::string& what) {
  if (!ok) {
    throw InputError(checkpoint + ": cannot be written as MixtralForCausalLM: " + what);
  }
}

json hf_config(const Config& cfg) {
  const auto& m = cfg.model;
  json j = {{"vocab_size", m.vocab_size},
            {"hidden_size", m.d_model},
            {"num_hidden_layers", m.n_layers},
            {"num_attention_heads", m.n_heads},
            {"num_key_value_heads", cfg.model.n_kv_heads > 0 ? m.n_kv_heads : m.n_heads},
            {"head_dim", m.d_model / m.n_heads},
            {"hidden_act", "silu"},
            {"max_position_embeddings", m.seq_len},
            {"rms_norm_eps", m.norm_eps},
            {"rope_theta", m.rope_theta},
            {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", m.rope_theta}}},
            {"tie_word_embeddings", m.tie_embeddings},
            {"attention_dropout", 0.0},
            {"torch_dtype", "float32"}};
  if (cfg.moe.enabled) {
    j["architectures"] = {"MixtralForCausalLM"};
    j["model_type"] = "mixtral";
    j["intermediate_size"] = cfg.moe.d_expert;
    j["num_local_experts"] = cfg.moe.num_experts;
    j["num_experts_per_tok"] = cfg.moe.top_k;
    j["router_jitter_noise"] = 0.0;
    j["output_router_logits"] = false;
    j["sliding_window"] = nullptr;
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["intermediate_size"] = m.d_ff;
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  return j;
}

template <typename T>
T config_value(const json& j, const std::string& key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) {
    throw InputError(path + ": no \"" + key + "\"");
  }
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    throw InputError(path + ": \"" + key + "\" has the wrong type");
  }
}

Config config_from_hf(const json& j, const std::string& path) {
  const auto arch = j.value("architectures", json::array());
  if (arch != json::array({"LlamaForCausalLM"})) {
    throw InputError(path + ": architectures = " + arch.dump() +
                     "; moelab imports LlamaForCausalLM (dense) models");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    throw InputError(path + ": rope_scaling is set; moelab's RoPE has no scaling");
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (j.value(bias, false))
      throw InputError(path + ": " + bias + " = true; moelab has no biases");
  }
  if (j.value("hidden_act", std::string("silu")) != "silu") {
    throw InputError(path + ": hidden_act = " + j["hidden_act"].dump() + "; expected silu");
  }
  Config cfg;
  auto& m = cfg.model;
  m.vocab_size = config_value<int64_t>(j, "vocab_size", path);
  m.d_model = config_value<int64_t>(j, "hidden_size", path);
  m.n_layers = config_value<int64_t>(j, "num_hidden_layers", path);
  m.n_heads = config_value<int64_t>(j, "num_attention_heads", path);
  m.n_kv_heads = j.value("num_key_value_heads", m.n_heads);
  m.d_ff = config_value<int64_t>(j, "intermediate_size", path);
  m.seq_len = config_value<int64_t>(j, "max_position_embeddings", path);
  m.norm_eps = j.value("rms_norm_eps", 1e-6);
  m.rope_theta = j.value("rope_theta", 10000.0);
  if (j.contains("rope_parameters") && j["rope_parameters"].contains("rope_theta")) {
    m.rope_theta = j["rope_parameters"]["rope_theta"].get<double>();
  }
  m.tie_embeddings = j.value("tie_word_embeddings", false);
  if (j.contains("head_dim") && !j["head_dim"].is_null() &&
      j["head_dim"].get<int64_t>() * m.n_heads != m.d_model) {
    throw InputError(path +
                     ": head_dim * num_attention_heads != hidden_size; moelab needs "
                     "head_dim = hidden_size / num_attention_heads");
  }
  cfg.source = path;
  return cfg;
}

// The weights of a Hugging Face folder: model.safetensors, or the shards that
// model.safetensors.index.json maps each tensor to (every listed tensor must be
// in its shard, and no tensor in two).
std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(index)) return read_safetensors(dir + "/model.safetensors");
  json parsed;
  try {
    parsed = json::parse(read_text_file(index, "safetensors index"));
  } catch (const json::exception& e) {
    throw InputError(index + ": not JSON (" + e.what() + ")");
  }
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

}  // namespace

void export_hf(const std::string& checkpoint, const std::string& out) {
  LoadedCheckpoint ckpt = load_checkpoint(checkpoint);
  if (!ckpt.meta.contains("config")) {
    throw InputError(checkpoint + "/meta.json: no \"config\" entry; not a moelab checkpoint");
  }
  const Config cfg = parse_config(ckpt.meta["config"].get<std::string>(), checkpoint + "/meta.json",
                                  {"parallel.ep=1", "checkpoint.resume=none"});
  if (cfg.model.qk_norm != "none") {
    throw InputError(checkpoint +
                     ": cannot be written as LlamaForCausalLM or MixtralForCausalLM: " +
                     "model.qk_norm = \"" + cfg.model.qk_norm + "\" (neither has QK-norm)");
  }
  if (cfg.moe.enabled) {
    const auto& e = cfg.moe;
    refuse_unless(cfg.moe_layers() == cfg.model.n_layers, checkpoint,
                  "dense layers among the MoE layers (moe.first_dense_layers, "
                  "moe.layer_interval; Mixtral's are all MoE)");
    refuse_unless(e.score == "softmax", checkpoint,
                  "moe.score = \"" + e.score + "\" (Mixtral's router is a softmax)");
    refuse_unless(e.route_scale == 1.0, checkpoint,
                  fmt::format("moe.route_scale = {} (Mixtral has no scale)", e.route_scale));
    refuse_unless(e.gate == "topk_softmax", checkpoint,
                  "moe.gate = \"" + e.gate + "\" (Mixtral renormalises the top-k: topk_softmax)");
    refuse_unless(e.shared_width() == 0, checkpoint, "shared experts (Mixtral has none)");
    refuse_unless(e.expert_widths.empty(), checkpoint, "moe.expert_widths (Mixtral's are equal)");
    refuse_unless(e.capacity_factor == 0, checkpoint,
                  "moe.capacity_factor > 0 (Mixtral drops no tokens)");
    refuse_unless(e.balance != "aux_free", checkpoint,
                  "moe.balance = \"aux_free\" (Mixtral has no routing bias)");
  }
  // The model's own parameter list says which tensors to take (not the optimizer's).
  Transformer model(cfg);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& p : model->named_weights()) {
    auto it = ckpt.tensors.find(p.key());
    if (it == ckpt.tensors.end()) {
      throw InputError(checkpoint + ": no tensor '" + p.key() + "'");
    }
    tensors[hf_name(p.key())] = it->second;
  }
  std::filesystem::create_directories(out);
  write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}});
  write_file_atomically(out + "/config.json", hf_config(cfg).dump(2) + "\n");
  spdlog::info("exported {} as {} to {}", checkpoint,
               cfg.moe.enabled ? "MixtralForCausalLM" : "LlamaForCausalLM", out);
}

std::string import_hf(const std::string& hf_dir, const std::string& out) {
  const std::string config_path = hf_dir + "/config.json";
  json j;
  try {
    j = json::parse(read_text_file(config_path, "Hugging Face config"));
  } catch (const json::exception& e) {
    throw InputError(config_path + ": " + e.what());
  }
  Config cfg = config_from_hf(j, config_path);
  const auto weights = read_hf_weights(hf_dir);
  Transformer model(cfg);
  TensorMap tensors;
  for (const auto& p : model->named_weights()) {
    const std::string name = hf_name(p.key());
    auto it = weights.find(name);
    if (it == weights.end() || it->second.sizes() != p.value().sizes()) {
      throw InputError(hf_dir + ": tensor '" + name + "' is missing or has another shape than " +
                       c10::str(p.value().sizes()));
    }
    tensors[p.key()] = it->second;
  }
  return write_run_start(out, cfg, tensors, {{"source", hf_dir}, {"method", "import_hf"}});
}

}  // namespace moelab
