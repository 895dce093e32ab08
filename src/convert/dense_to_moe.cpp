#include "convert/dense_to_moe.h"

#include "checkpoint/checkpoint_io.h"
#include "config/load.h"
#include "model/compute.h"
#include "model/transformer.h"
#include "util/error.h"

namespace moelab {
namespace {

std::string ffn_name(int64_t layer, const char* w) {
  return "layers." + std::to_string(layer) + ".ffn." + w;
}

}  // namespace

DenseCheckpoint load_dense_checkpoint(const std::string& dir,
                                      const std::vector<std::string>& overrides) {
  LoadedCheckpoint ckpt = load_checkpoint(dir);
  if (!ckpt.meta.contains("config") || !ckpt.meta["config"].is_string()) {
    throw InputError(dir + "/meta.json: no \"config\" entry; not a moelab checkpoint");
  }
  std::vector<std::string> all = {"parallel.ep=1", "checkpoint.resume=none"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  DenseCheckpoint dense{
      dir, parse_config(ckpt.meta["config"].get<std::string>(), dir + "/meta.json", all),
      std::move(ckpt.tensors)};
  if (dense.cfg.moe.enabled) {
    throw InputError(dir +
                     ": the checkpoint is of an MoE model (moe.enabled = true); upcycling "
                     "and conversion start from a dense one");
  }
  return dense;
}

FfnWeights dense_ffn(const DenseCheckpoint& dense, int64_t layer) {
  FfnWeights ffn;
  for (auto [w, out] : {std::pair{"w1", &ffn.w1}, {"w3", &ffn.w3}, {"w2", &ffn.w2}}) {
    auto it = dense.tensors.find(ffn_name(layer, w));
    if (it == dense.tensors.end()) {
      throw InputError(dense.dir + ": no tensor '" + ffn_name(layer, w) + "'");
    }
    *out = it->second.to(torch::kFloat32);
  }
  return ffn;
}

Config moe_config_from_dense(const Config& dense, MoeConfig moe, int64_t experts, int64_t top_k,
                             int64_t d_expert) {
  Config cfg = dense;
  moe.enabled = true;
  moe.num_experts = experts;
  moe.top_k = top_k;
  moe.d_expert = d_expert;
  moe.expert_widths.clear();
  cfg.moe = moe;
  if (cfg.moe_layers() != cfg.model.n_layers) {
    throw InputError(
        "moe.first_dense_layers / moe.layer_interval: converting a dense model into an MoE that "
        "keeps dense layers is not supported; every layer becomes MoE");
  }
  cfg.parallel.ep = 1;
  cfg.checkpoint.resume = "auto";
  validate(cfg);
  return cfg;
}

TensorMap moe_weights_from_dense(const DenseCheckpoint& dense, const Config& moe_cfg,
                                 const MakeExperts& make_experts, double router_std) {
  Transformer model(model_settings(moe_cfg));
  torch::NoGradGuard no_grad;
  TensorMap out;
  for (const auto& p : model->named_weights()) out[p.key()] = p.value().detach().clone();
  for (const auto& b : model->named_buffers()) out[b.key()] = b.value().detach().zero_();
  for (int64_t layer = 0; layer < moe_cfg.model.n_layers; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".moe.";
    const auto experts = make_experts(layer, dense_ffn(dense, layer));
    for (size_t e = 0; e < experts.size(); ++e) {
      const std::string ex = prefix + "experts." + std::to_string(e) + ".";
      out.at(ex + "w1").copy_(experts[e].w1);
      out.at(ex + "w3").copy_(experts[e].w3);
      out.at(ex + "w2").copy_(experts[e].w2);
    }
    auto& router = out.at(prefix + "router.weight");
    init_normal_keyed(router, moe_cfg.train.seed, prefix + "router.weight", router_std);
  }
  // Everything outside the FFNs is the dense model's.
  for (auto& [name, t] : out) {
    if (name.find(".moe.") != std::string::npos) continue;
    auto it = dense.tensors.find(name);
    if (it == dense.tensors.end() || it->second.sizes() != t.sizes()) {
      throw InputError(dense.dir + ": tensor '" + name +
                       "' is missing or has another shape than the MoE built from its config");
    }
    t.copy_(it->second);
  }
  return out;
}

}  // namespace moelab
