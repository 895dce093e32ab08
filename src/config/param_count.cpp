#include "config/param_count.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "util/error.h"

namespace moelab {

namespace {

// One MTP module: its two norms and projection [d, 2d], and a dense block
// (attention, its two norms and a SwiGLU of model.d_ff), counted as one layer
// of the dense model without its final norm.
int64_t mtp_module_params(const Config& cfg) {
  Config one = cfg;
  one.model.n_layers = 1;
  one.moe.enabled = false;
  one.train.mtp_depth = 0;
  const ParamCounts layer = count_params(one);
  const int64_t d = cfg.model.d_model;
  return 2 * d + 2 * d * d + layer.attention + (layer.norms - d) + layer.dense_ffn;
}

// One layer's latent attention (model/latent_attention.h): the query path
// (q_a_proj, q_b_proj, or one q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj.
int64_t latent_attention_per_layer(const ModelConfig& m) {
  const int64_t d = m.d_model, q_width = m.n_heads * m.qk_head_dim();
  const int64_t query =
      m.q_lora_rank > 0 ? d * m.q_lora_rank + m.q_lora_rank * q_width : d * q_width;
  const int64_t latent = d * (m.kv_lora_rank + m.qk_rope_head_dim);
  const int64_t expand = m.kv_lora_rank * m.n_heads * (m.qk_nope_head_dim + m.v_head_dim);
  return query + latent + expand + m.n_heads * m.v_head_dim * d;
}

// Attention weights and its norms' (QK-norm, or mla's latent norms), all layers.
void count_attention(const ModelConfig& m, ParamCounts& c) {
  const int64_t d = m.d_model, layers = m.n_layers;
  if (m.latent_attention()) {
    c.attention = layers * latent_attention_per_layer(m);
    c.norms += layers * (m.q_lora_rank + m.kv_lora_rank);
    return;
  }
  const int64_t q_width = m.n_heads * m.head_dim(), kv_width = m.kv_heads() * m.head_dim();
  const int64_t qkv_biases = m.qkv_bias ? q_width + 2 * kv_width : 0;
  c.attention = layers * (d * q_width + 2 * d * kv_width + q_width * d + qkv_biases);
  if (m.qk_norm == QkNorm::kHead) c.norms += layers * 2 * m.head_dim();
  if (m.qk_norm == QkNorm::kFull) c.norms += layers * (q_width + kv_width);
}

}  // namespace

ParamCounts count_params(const Config& cfg) {
  const auto& m = cfg.model;
  const int64_t d = m.d_model, layers = m.n_layers;
  ParamCounts c;
  c.embedding = m.vocab_size * d;
  c.head = m.tie_embeddings ? 0 : m.vocab_size * d;
  c.norms = (2 * layers + 1) * d;
  count_attention(m, c);
  const int64_t swiglu_per_width = 3 * d;  // w1, w3: [h, d]; w2: [d, h]
  const int64_t moe_layers = cfg.moe_layers();
  if (moe_layers > 0) {
    const auto& moe = cfg.moe;
    c.router = moe_layers * d * moe.num_experts;
    int64_t widths = 0;
    for (int64_t e = 0; e < moe.num_experts; ++e) widths += moe.expert_width(e);
    c.experts_total = moe_layers * swiglu_per_width * widths;
    // Heterogeneous experts: what a token activates on average under uniform
    // routing (top_k times the mean width), rounded to whole units.
    c.experts_active = moe_layers * swiglu_per_width *
                       ((moe.top_k * widths + moe.num_experts / 2) / moe.num_experts);
    const int64_t gate = moe.shared_expert_gate && moe.shared_width() > 0 ? d : 0;
    c.shared_experts = moe_layers * (swiglu_per_width * moe.shared_width() + gate);
  }
  c.dense_ffn = (layers - moe_layers) * swiglu_per_width * m.d_ff;
  const int64_t always =
      c.embedding + c.head + c.attention + c.norms + c.dense_ffn + c.router + c.shared_experts;
  c.total = always + c.experts_total;
  c.active = always + c.experts_active;
  if (cfg.train.mtp_depth > 0) c.mtp = cfg.train.mtp_depth * mtp_module_params(cfg);
  return c;
}

namespace {

// The candidate whose dense total is closest to target; ties go to the smaller.
template <typename SetWidth>
MatchResult closest(const Config& base, int64_t target, int64_t lo, int64_t hi, int64_t step,
                    SetWidth set_width) {
  MatchResult best;
  best.target = target;
  int64_t best_gap = -1;
  for (int64_t w = lo; w <= hi; w += step) {
    Config cand = base;
    set_width(cand, w);
    const int64_t total = count_params(cand).total;
    const int64_t gap = std::llabs(total - target);
    if (best_gap < 0 || gap < best_gap) {
      best_gap = gap;
      best.dense = cand;
      best.dense_total = total;
    }
  }
  best.mismatch = static_cast<double>(best.dense_total - target) / static_cast<double>(target);
  return best;
}

}  // namespace

MatchResult match_dense(const Config& moe_cfg, const std::string& target, const std::string& knob) {
  if (target != "active" && target != "total") {
    throw InputError("params --match: expected \"active\" or \"total\", got \"" + target + "\"");
  }
  const ParamCounts moe_counts = count_params(moe_cfg);
  const int64_t goal = target == "active" ? moe_counts.active : moe_counts.total;
  Config base = moe_cfg;
  base.moe.enabled = false;
  // A dense model has no experts to spread: the MoE's expert-parallel ranks
  // all become data parallel, so the match runs at the same rank count.
  base.parallel.ep = 1;

  if (knob == "d_ff") {
    // total is linear in d_ff: solve, then check the integers on either side.
    base.model.d_ff = 0;
    const int64_t fixed = count_params(base).total;
    const int64_t per_unit = 3 * base.model.d_model * base.model.n_layers;
    const int64_t guess = std::max<int64_t>(1, (goal - fixed) / per_unit);
    return closest(base, goal, std::max<int64_t>(1, guess - 1), guess + 1, 1,
                   [](Config& c, int64_t w) { c.model.d_ff = w; });
  }
  if (knob == "d_model") {
    // An explicit head_dim (or mla's head widths) stays: the heads keep their
    // width, so any d_model fits.
    const int64_t step = base.model.heads_apart_from_d_model()
                             ? 1
                             : std::lcm(2 * base.model.n_heads, base.model.kv_heads());
    // total grows at least linearly in d_model (embedding), so the search is bounded.
    int64_t hi = step;
    Config probe = base;
    while (true) {
      probe.model.d_model = hi;
      if (count_params(probe).total >= goal) break;
      hi += step;
    }
    return closest(base, goal, step, hi, step, [](Config& c, int64_t w) { c.model.d_model = w; });
  }
  throw InputError("params --knob: expected \"d_ff\" or \"d_model\", got \"" + knob + "\"");
}

MatchResult match_moe_total(const Config& base, int64_t num_experts, double rate,
                            int64_t target_total) {
  const double k = rate * static_cast<double>(num_experts);
  const int64_t top_k = std::llround(k);
  if (!(rate > 0) || std::abs(k - static_cast<double>(top_k)) > 1e-9 || top_k < 1 ||
      top_k > num_experts) {
    throw InputError(fmt::format(
        "activation rate {} of {} experts is not a whole top_k between 1 and {} (rate = top_k "
        "/ num_experts)",
        rate, num_experts, num_experts));
  }
  Config moe = base;
  moe.moe.enabled = true;
  moe.moe.num_experts = num_experts;
  moe.moe.top_k = top_k;
  moe.moe.num_shared_experts = 0;
  moe.moe.d_shared = 0;
  moe.moe.shared_expert_gate = false;
  moe.moe.expert_widths.clear();
  moe.parallel.ep = 1;
  moe.moe.d_expert = 0;
  const int64_t fixed = count_params(moe).total;
  const int64_t per_unit = 3 * moe.model.d_model * moe.moe_layers() * num_experts;
  if (target_total - fixed < per_unit) {
    throw InputError(fmt::format(
        "a total of {} parameters leaves no room for {} experts of width >= 1 ({} are outside "
        "the experts)",
        target_total, num_experts, fixed));
  }
  const int64_t guess = (target_total - fixed) / per_unit;
  return closest(moe, target_total, std::max<int64_t>(1, guess - 1), guess + 1, 1,
                 [](Config& c, int64_t w) { c.moe.d_expert = w; });
}

namespace {

// QK^T (the query/key width) and AV (the value width) of one layer over the
// seq_len window, forward and backward.
double attention_score_flops(const ModelConfig& m) {
  return 6.0 * m.seq_len * static_cast<double>(m.n_heads * (m.qk_head_dim() + m.value_head_dim()));
}

}  // namespace

double model_flops_per_token(const Config& cfg) {
  const ParamCounts counts = count_params(cfg);
  const auto& m = cfg.model;
  const double head_matmul = static_cast<double>(m.vocab_size) * m.d_model;
  const double non_embedding_active =
      static_cast<double>(counts.active - counts.embedding - counts.head) + head_matmul;
  const double depth = static_cast<double>(cfg.train.mtp_depth);
  const double mtp = 6.0 * (static_cast<double>(counts.mtp) + depth * head_matmul) +
                     depth * attention_score_flops(m);
  return 6.0 * non_embedding_active + m.n_layers * attention_score_flops(m) + mtp;
}

void apply_compute_budget(Config& cfg) {
  if (cfg.train.compute_budget <= 0) return;
  const int64_t batch_tokens = cfg.train.batch_tokens > 0
                                   ? cfg.train.batch_tokens
                                   : cfg.train.batch_seqs * cfg.model.seq_len;
  const double step_flops = model_flops_per_token(cfg) * static_cast<double>(batch_tokens);
  const double steps = std::floor(cfg.train.compute_budget / step_flops);
  auto it = cfg.origin.find("train.compute_budget");
  const std::string where = it == cfg.origin.end() ? cfg.source : it->second;
  if (steps < 1) {
    throw InputError(fmt::format(
        "{}: train.compute_budget = {:.4g} FLOPs is less than one step of {:.4g} FLOPs ({} "
        "tokens x {:.4g} FLOPs per token)",
        where, cfg.train.compute_budget, step_flops, batch_tokens, model_flops_per_token(cfg)));
  }
  cfg.train.max_steps = static_cast<int64_t>(steps);
  cfg.origin["train.max_steps"] = where + " (from train.compute_budget)";
}

}  // namespace moelab
