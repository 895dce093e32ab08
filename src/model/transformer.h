// LLaMA-style decoder: token embedding -> L x [x + Attn(RMSNorm(x));
// x + FFN(RMSNorm(x))] -> RMSNorm -> head. Attn is multi-head (model/attention.h)
// or latent (model/latent_attention.h) attention by model.attention; FFN is a
// dense SwiGLU or, with moe.enabled, an MoE layer in every block.
//
// Precision: parameters and the residual stream stay in the master dtype (fp32,
// or double after module->to(kDouble)); when train.precision resolves to bf16
// (precision.h) matmuls run in bf16 while RMSNorm statistics, softmax, the router and the loss stay
// fp32.
//
// Initialisation: every parameter is drawn from normal(0, init_std) on its own
// generator seeded by hash(seed, name), each expert's rows of the stacks by
// their checkpoint name (names carry the layer and the global expert id); output projections
// (attention wo, FFN/expert w2) use init_std / sqrt(2 * n_layers) when scaled_residual_init;
// RMSNorm weights are 1; the q/k/v biases (model.qkv_bias) are 0, and so is the
// shared expert's gate w_g (moe.shared_expert_gate), which thus starts at
// sigmoid(0) = 1/2 on every token (transformers draws Qwen2-MoE's from
// normal(0, initializer_range): about 1/2 with per-token noise).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/attention.h"
#include "model/moe_layer.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "model/token_dispatcher.h"

namespace moelab {

struct ModelOutput {
  torch::Tensor logits;    // [B, S, V] in the compute dtype, without targets
  torch::Tensor lm_loss;   // with targets: mean token cross-entropy, fp32
  torch::Tensor aux_loss;  // scalars (0 for dense), summed over MoE layers,
  torch::Tensor z_loss;    // already multiplied by their coefficients
  // With train.mtp_depth = D and targets (model/mtp.h): each depth's mean
  // cross-entropy, and mtp_loss_weight / D times their sum (0 without MTP).
  std::vector<torch::Tensor> mtp_ce;
  torch::Tensor mtp_loss;
  std::vector<MoeLayerStats> moe_stats;  // one per MoE layer
};

struct MoeContext {  // how MoE layers reach other ranks; default = single rank
  // null = LocalDispatcher holding all experts
  std::function<std::shared_ptr<TokenDispatcher>(int64_t layer)> make_dispatcher;
  ReduceMean reduce_mean;  // null = local statistics
};

// What a Transformer is built from: its architecture, how it computes and the
// seed its parameters are drawn from; the rest of a run's Config is no concern
// of the model's.
struct ModelSettings {
  ModelConfig model;
  MoeConfig moe;
  Precision precision = Precision::kAuto;  // train.precision, resolved per device once
  ActivationCheckpointing checkpointing = ActivationCheckpointing::kNone;
  int64_t init_seed = 0;  // train.seed
  int64_t mtp_depth = 0;  // train.mtp_depth: multi-token prediction modules (model/mtp.h)
  double mtp_loss_weight = 0;
};

// The model's settings from a run configuration.
ModelSettings model_settings(const Config& cfg);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelSettings& settings, int64_t layer, const MoeContext& ctx);
  // h: [B, S, d] residual stream (master dtype). Appends MoE losses/stats to out.
  torch::Tensor forward(const torch::Tensor& h, c10::ScalarType compute_dtype, ModelOutput& out);

  RMSNorm attn_norm{nullptr}, ffn_norm{nullptr};
  std::shared_ptr<AttentionLayer> attn;  // model.attention: Attention or LatentAttention
  SwiGLU ffn{nullptr};                   // dense blocks
  MoeLayer moe{nullptr};                 // MoE blocks
  // Set from outside on a dense block: computes the FFN's output from its
  // normalised input (compute dtype) instead of `ffn`, adding any losses to
  // `out`. `moelab convert --method dot` calibrates an MoE in the FFN's place.
  std::function<torch::Tensor(const torch::Tensor& ffn_in, ModelOutput& out)> ffn_override;

 private:
  torch::Tensor forward_block(const torch::Tensor& h, c10::ScalarType compute_dtype,
                              ModelOutput& out);
  // The MoE FFN, checkpointed when train.activation_checkpointing = "moe".
  torch::Tensor forward_moe(const torch::Tensor& ffn_in, c10::ScalarType compute_dtype,
                            int64_t seq_len, ModelOutput& out);
  torch::Tensor run_moe(const torch::Tensor& ffn_in, c10::ScalarType compute_dtype, int64_t seq_len,
                        ModelOutput& out);

  ActivationCheckpointing checkpointing_ = ActivationCheckpointing::kNone;
};
TORCH_MODULE(Block);

class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const ModelSettings& settings, MoeContext ctx = {});
  // tokens [B, S] int64. With targets [B, S] the output holds lm_loss and no
  // logits: the head and the loss are fused (kernels/linear_cross_entropy.h),
  // equal to the mean token cross-entropy of the logits (fp32; double stays
  // double) without the [B, S, V] logits. With MTP modules and targets, the
  // output holds their losses too: targets[:, j] = token j + 1 gives depth k
  // its inputs and targets (model/mtp.h).
  ModelOutput forward(const torch::Tensor& tokens, const torch::Tensor& targets = {});

  // Matmuls in `precision` (resolved per device) from the next forward on: a
  // resumed run's, once its checkpoint says which it trained in.
  void set_precision(Precision precision);

  // Routed-expert parameters (held by a subset of ranks, reduced over the
  // expert-data-parallel group); everything else is replicated on all ranks.
  bool is_expert_parameter(const std::string& name) const;

  // Every stacked expert parameter (full name) and the names its rows have in
  // checkpoints: "layers.<l>.moe.experts.<global id>.w1", ...
  StackedParams stacked_params() const;
  // The parameters under their checkpoint names: a stacked expert parameter
  // as one view per row (writing into a view writes the parameter). What
  // conversion, initialisation and tests address by name.
  torch::OrderedDict<std::string, torch::Tensor> named_weights() const;
  // The gradients of named_weights() (undefined where a parameter has none).
  torch::OrderedDict<std::string, torch::Tensor> named_weight_grads() const;

  // Re-draws every parameter from (seed, name); the constructor calls it.
  void reset_parameters(int64_t seed);
  // After each optimizer step: every MoE layer moves its routing bias
  // ("aux_free") by the step's load, or with apply = false only forgets it.
  void update_balance_biases(bool apply = true);

  torch::Tensor embedding;  // [V, d]
  torch::Tensor head;       // [V, d]; the embedding itself when tied
  torch::nn::ModuleList layers;
  RMSNorm final_norm{nullptr};
  torch::nn::ModuleList mtp{nullptr};  // train.mtp_depth MtpModules; null when 0

 private:
  torch::Tensor embed(const torch::Tensor& tokens) const;
  // The final norm, head and mean cross-entropy of hidden states h [B, S, d].
  torch::Tensor head_loss(const torch::Tensor& h, const torch::Tensor& targets,
                          c10::ScalarType compute_dtype);
  // The MTP modules' losses into `out`, from the main model's last hidden state.
  void forward_mtp(torch::Tensor h, const torch::Tensor& targets, c10::ScalarType compute_dtype,
                   ModelOutput& out);
  // named_parameters() with each stacked expert tensor's rows listed apart, of(p) for p.
  torch::OrderedDict<std::string, torch::Tensor> named_rows(
      const std::function<torch::Tensor(const torch::Tensor&)>& of) const;

  ModelConfig model_;
  double mtp_loss_weight_;
  // train.precision resolved (set_precision): bf16 matmuls on a CPU tensor, on a CUDA one
  // (otherwise the parameters' own dtype: fp32, or double in gradient checks).
  bool bf16_on_cpu_ = false, bf16_on_cuda_ = false;
};
TORCH_MODULE(Transformer);

}  // namespace moelab
