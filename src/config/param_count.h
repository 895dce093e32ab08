// Analytic parameter counts of a Config (no module is built) and the dense
// config whose size matches an MoE config's active or total count.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace moelab {

struct ParamCounts {
  int64_t embedding = 0;
  int64_t attention = 0;  // all layers, with the q/k/v biases (model.qkv_bias); mla's projections
  int64_t norms = 0;      // 2 per layer + final, and the QK-norms (mla: its latents' norms)
  int64_t dense_ffn = 0;  // the dense layers' FFNs (all layers of a dense model)
  int64_t router = 0;
  int64_t experts_total = 0;   // all routed experts
  int64_t experts_active = 0;  // top_k experts per token (heterogeneous: of mean width)
  int64_t shared_experts = 0;  // with their gates' w_g (moe.shared_expert_gate)
  int64_t head = 0;            // 0 when tied to the embedding
  int64_t total = 0;
  int64_t active = 0;  // parameters one token uses (total - inactive experts)
  // The multi-token prediction modules (train.mtp_depth; model/mtp.h): trained
  // beside the model but neither evaluated nor exported, so in neither count above.
  int64_t mtp = 0;
};

ParamCounts count_params(const Config& cfg);

struct MatchResult {
  Config dense;        // the matched config (match_dense: moe.enabled = false), width set
  int64_t target = 0;  // the MoE's active or total count
  int64_t dense_total = 0;
  double mismatch = 0.0;  // (dense_total - target) / target
};

// target: "active" | "total"; knob: "d_ff" | "d_model". For d_model the width
// stays a multiple of 2 * n_heads (even head dim for RoPE) and of n_kv_heads;
// with an explicit model.head_dim (or mla's head widths) the heads keep that
// width and d_model may be
// any width (only the residual stream's side of the projections changes); d_ff
// is left as it is.
MatchResult match_dense(const Config& moe_cfg, const std::string& target, const std::string& knob);

// An MoE whose total parameter count matches `target_total` at an activation
// rate of top_k / num_experts = rate: `base`'s model with moe.enabled,
// top_k = rate x num_experts (which must come out whole, between 1 and
// num_experts), shared experts (with their gate) and heterogeneous widths
// cleared, and d_expert solved (the total is linear in it). `dense` holds that
// MoE config. InputError naming the rate when no whole top_k fits or no
// d_expert >= 1 reaches the target.
MatchResult match_moe_total(const Config& base, int64_t num_experts, double rate,
                            int64_t target_total);

// Training FLOPs per token (forward + backward), the PaLM-paper estimate:
//   6 * N  +  6 * n_layers * seq_len * n_heads * (qk_head_dim + v_head_dim)
// (12 * n_layers * seq_len * n_heads * head_dim where both are head_dim)
// N = active non-embedding parameters including the output head (the head is a
// matmul even when tied; the embedding lookup is not), from count_params: for an
// MoE that counts top_k routed experts, shared experts and the router. The second
// term is the attention scores and weighted sum (QK^T and AV, forward and
// backward) over the full seq_len window, not halved for causality; QK^T's
// width is the heads' query/key width and AV's their value width (both
// n_heads * head_dim = d_model unless model.head_dim sets it apart; mla's
// are n_heads * (qk_nope_head_dim + qk_rope_head_dim) and n_heads * v_head_dim).
// With train.mtp_depth = D, each MTP module adds the same estimate for its own
// parameters, a head matmul and one layer's attention scores (its window is k
// tokens shorter; not counted).
double model_flops_per_token(const Config& cfg);

// train.compute_budget > 0: sets train.max_steps to the whole steps the budget
// buys, floor(budget / (model_flops_per_token x global batch tokens)), and
// records where it came from; InputError naming the key when that is under
// one step. A budget of 0 leaves max_steps as it is.
void apply_compute_budget(Config& cfg);

}  // namespace moelab
