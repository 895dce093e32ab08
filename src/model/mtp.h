// Multi-token prediction (DeepSeek-V3, section 2.2): train.mtp_depth = D
// sequential modules after the main model. Module k (1..D) at position i joins
// the previous depth's hidden state h^{k-1}_i with the embedding of token
// t_{i+k}:
//   h'_i  = M_k [RMSNorm(Emb(t_{i+k})); RMSNorm(h^{k-1}_i)]      M_k: [d, 2d]
//   h^k   = Block_k(h')  over the positions i = 0 .. S-1-k that have a target
// and the main model's final norm and head predict t_{i+k+1} from h^k_i.
// Depth 0 is the main model's last hidden state before its final norm (the
// paper's "representation given by the main model"), and each depth hands on
// its block's output un-normed: hnorm normalises it. The embedding comes first
// in the concatenation, as in DeepSeek-V3's released eh_proj and
// Megatron-Core. The embedding, final norm and head are the main model's
// (DeepSeek-V3's released weights and Megatron-Core give each module a final
// norm of its own, shared_head.norm, and hand its normed output on). Each
// module's block is dense (attention and a SwiGLU of model.d_ff) even in an
// MoE model, where DeepSeek-V3's are MoE blocks: no router, experts or
// expert-parallel exchange of their own.
#pragma once

#include <torch/torch.h>

#include "model/rmsnorm.h"
#include "model/transformer.h"

namespace moelab {

class MtpModuleImpl : public torch::nn::Module {
 public:
  explicit MtpModuleImpl(const ModelSettings& settings);
  // h_prev, next_embedding: [B, S', d] (master dtype), position i of
  // next_embedding holding token t_{i+k}. Returns h^k [B, S', d].
  torch::Tensor forward(const torch::Tensor& h_prev, const torch::Tensor& next_embedding,
                        c10::ScalarType compute_dtype, ModelOutput& out);

  RMSNorm enorm{nullptr}, hnorm{nullptr};
  torch::Tensor proj;  // M_k: [d, 2d], the embedding's columns first
  Block block{nullptr};
};
TORCH_MODULE(MtpModule);

// The settings of an MTP module's block: the model's with every FFN dense.
ModelSettings mtp_block_settings(const ModelSettings& settings);

}  // namespace moelab
