#include "model/transformer.h"

#include <cmath>
#include <map>

#include "kernels/linear_cross_entropy.h"
#include "model/activation_checkpoint.h"
#include "model/compute.h"
#include "model/latent_attention.h"
#include "model/local_dispatcher.h"
#include "model/mtp.h"
#include "model/phase_timer.h"
#include "model/precision.h"
#include "util/error.h"

namespace moelab {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The q/k/v biases and the shared expert's gate: zero, so a bias starts as
// none and the gate at sigmoid(0) = 1/2 on every token.
bool starts_at_zero(const std::string& name) {
  for (const char* suffix : {".attn.bq", ".attn.bk", ".attn.bv", ".moe.shared_gate"}) {
    if (ends_with(name, suffix)) return true;
  }
  return false;
}

std::shared_ptr<AttentionLayer> make_attention(const ModelConfig& m) {
  if (m.latent_attention()) return LatentAttention(m).ptr();
  return Attention(m).ptr();
}

using Piece = std::function<torch::Tensor(const torch::Tensor&, ModelOutput&)>;

// piece(x, out) with its activations recomputed in backward (model/
// activation_checkpoint.h). Its aux and z losses join `out` as outputs of the
// checkpoint, so their gradients flow through the recomputation; its router
// statistics join `out` from the first pass only.
torch::Tensor run_checkpointed(const Piece& piece, const torch::Tensor& x, ModelOutput& out) {
  auto stats = std::make_shared<std::vector<MoeLayerStats>>();
  const auto loss_options = out.aux_loss.options();
  const auto results = checkpointed(
      [piece, stats, loss_options](const std::vector<torch::Tensor>& in) {
        ModelOutput part;
        part.aux_loss = torch::zeros({}, loss_options);
        part.z_loss = torch::zeros({}, loss_options);
        auto y = piece(in[0], part);
        if (!recomputing()) *stats = std::move(part.moe_stats);
        return std::vector<torch::Tensor>{y, part.aux_loss, part.z_loss};
      },
      {x});
  out.aux_loss = out.aux_loss + results[1];
  out.z_loss = out.z_loss + results[2];
  for (auto& s : *stats) out.moe_stats.push_back(std::move(s));
  return results[0];
}

}  // namespace

ModelSettings model_settings(const Config& cfg) {
  ModelSettings settings;
  settings.model = cfg.model;
  settings.moe = cfg.moe;
  settings.precision = cfg.train.precision;
  settings.checkpointing = cfg.train.activation_checkpointing;
  settings.init_seed = cfg.train.seed;
  settings.mtp_depth = cfg.train.mtp_depth;
  settings.mtp_loss_weight = cfg.train.mtp_loss_weight;
  return settings;
}

BlockImpl::BlockImpl(const ModelSettings& settings, int64_t layer, const MoeContext& ctx)
    : checkpointing_(settings.checkpointing) {
  const ModelConfig& m = settings.model;
  attn_norm = register_module("attn_norm", RMSNorm(m.d_model, m.norm_eps));
  attn = register_module("attn", make_attention(m));
  ffn_norm = register_module("ffn_norm", RMSNorm(m.d_model, m.norm_eps));
  if (settings.moe.is_moe_layer(layer)) {
    auto dispatcher = ctx.make_dispatcher
                          ? ctx.make_dispatcher(layer)
                          : std::make_shared<LocalDispatcher>(settings.moe.num_experts);
    moe = register_module(
        "moe", MoeLayer(m.d_model, settings.moe, std::move(dispatcher), ctx.reduce_mean));
  } else {
    ffn = register_module("ffn", SwiGLU(m.d_model, m.d_ff));
  }
}

torch::Tensor BlockImpl::forward(const torch::Tensor& h, c10::ScalarType compute_dtype,
                                 ModelOutput& out) {
  if (checkpointing_ != ActivationCheckpointing::kFull) return forward_block(h, compute_dtype, out);
  return run_checkpointed(
      [this, compute_dtype](const torch::Tensor& x, ModelOutput& o) {
        return forward_block(x, compute_dtype, o);
      },
      h, out);
}

torch::Tensor BlockImpl::forward_moe(const torch::Tensor& ffn_in, c10::ScalarType compute_dtype,
                                     int64_t seq_len, ModelOutput& out) {
  if (checkpointing_ != ActivationCheckpointing::kMoe) {
    return run_moe(ffn_in, compute_dtype, seq_len, out);
  }
  return run_checkpointed(
      [this, compute_dtype, seq_len](const torch::Tensor& x, ModelOutput& o) {
        return run_moe(x, compute_dtype, seq_len, o);
      },
      ffn_in, out);
}

torch::Tensor BlockImpl::run_moe(const torch::Tensor& ffn_in, c10::ScalarType compute_dtype,
                                 int64_t seq_len, ModelOutput& out) {
  auto moe_out = moe->forward(ffn_in, compute_dtype, seq_len);
  out.aux_loss = out.aux_loss + moe_out.aux_loss;
  out.z_loss = out.z_loss + moe_out.z_loss;
  out.moe_stats.push_back(std::move(moe_out.stats));
  return moe_out.y;
}

torch::Tensor BlockImpl::forward_block(const torch::Tensor& h, c10::ScalarType compute_dtype,
                                       ModelOutput& out) {
  torch::Tensor attn_in;
  {
    PhaseScope phase(Phase::kNorm);
    attn_in = attn_norm->forward(h, compute_dtype);
  }
  torch::Tensor x;
  {
    PhaseScope phase(Phase::kAttention);
    x = h + attn->forward(attn_in).to(h.scalar_type());
  }
  if (!moe) {
    torch::Tensor ffn_in;
    {
      PhaseScope phase(Phase::kNorm);
      ffn_in = ffn_norm->forward(x, compute_dtype);
    }
    PhaseScope phase(Phase::kDenseFfn);
    const auto y = ffn_override ? ffn_override(ffn_in, out) : ffn->forward(ffn_in);
    return x + y.to(x.scalar_type());
  }
  torch::Tensor ffn_in;
  {
    PhaseScope phase(Phase::kNorm);
    ffn_in = ffn_norm->forward(x);  // master dtype: the router needs full precision
  }
  const int64_t d = x.size(-1);
  const auto y = forward_moe(ffn_in.view({-1, d}), compute_dtype, x.size(1), out);
  return x + y.to(x.scalar_type()).view(x.sizes());
}

void TransformerImpl::set_precision(Precision precision) {
  bf16_on_cpu_ = resolve_precision(precision, torch::kCPU).precision == Precision::kBf16;
  bf16_on_cuda_ = resolve_precision(precision, torch::kCUDA).precision == Precision::kBf16;
}

TransformerImpl::TransformerImpl(const ModelSettings& settings, MoeContext ctx)
    : model_(settings.model), mtp_loss_weight_(settings.mtp_loss_weight) {
  set_precision(settings.precision);
  const int64_t vocab = model_.vocab_size, d = model_.d_model;
  embedding = register_parameter("embedding", torch::empty({vocab, d}));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < model_.n_layers; ++l) layers->push_back(Block(settings, l, ctx));
  final_norm = register_module("final_norm", RMSNorm(d, model_.norm_eps));
  if (settings.mtp_depth > 0) {
    mtp = register_module("mtp", torch::nn::ModuleList());
    for (int64_t k = 0; k < settings.mtp_depth; ++k) mtp->push_back(MtpModule(settings));
  }
  head = model_.tie_embeddings ? embedding : register_parameter("head", torch::empty({vocab, d}));
  reset_parameters(settings.init_seed);
}

void TransformerImpl::reset_parameters(int64_t seed) {
  const double std = model_.init_std;
  const double out_std = model_.scaled_residual_init ? std / std::sqrt(2.0 * model_.n_layers) : std;
  torch::NoGradGuard no_grad;
  for (auto& item : named_weights()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (ends_with(name, "norm.weight")) {
      p.fill_(1.0);
    } else if (starts_at_zero(name)) {
      p.zero_();
    } else if (ends_with(name, ".wo") || ends_with(name, ".w2")) {
      init_normal_keyed(p, seed, name, out_std);
    } else {
      init_normal_keyed(p, seed, name, std);
    }
  }
}

void TransformerImpl::update_balance_biases(bool apply) {
  for (auto& layer : *layers) {
    if (auto moe = layer->as<Block>()->moe) moe->update_balance_bias(apply);
  }
}

bool TransformerImpl::is_expert_parameter(const std::string& name) const {
  return name.find(".moe.experts.") != std::string::npos;
}

StackedParams TransformerImpl::stacked_params() const {
  StackedParams out;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    const auto* experts = item.value()->as<ExpertsImpl>();
    if (!experts) continue;
    const std::string prefix = item.key() + ".";
    for (auto param : experts->stacked_params()) {
      param.name = prefix + param.name;
      for (auto& row : param.row_names) row = prefix + row;
      out.push_back(std::move(param));
    }
  }
  return out;
}

torch::OrderedDict<std::string, torch::Tensor> TransformerImpl::named_weights() const {
  return named_rows([](const torch::Tensor& p) { return p; });
}

torch::OrderedDict<std::string, torch::Tensor> TransformerImpl::named_weight_grads() const {
  return named_rows([](const torch::Tensor& p) { return p.grad(); });
}

torch::OrderedDict<std::string, torch::Tensor> TransformerImpl::named_rows(
    const std::function<torch::Tensor(const torch::Tensor&)>& of) const {
  std::map<std::string, std::vector<std::string>> rows_of;
  for (auto& param : stacked_params()) rows_of[param.name] = std::move(param.row_names);
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& item : named_parameters()) {
    const auto rows = rows_of.find(item.key());
    const torch::Tensor t = of(item.value());
    if (rows == rows_of.end()) {
      out.insert(item.key(), t);
      continue;
    }
    for (size_t r = 0; r < rows->second.size(); ++r) {
      out.insert(rows->second[r], t.defined() ? t.select(0, static_cast<int64_t>(r)) : t);
    }
  }
  return out;
}

torch::Tensor TransformerImpl::embed(const torch::Tensor& tokens) const {
  PhaseScope phase(Phase::kEmbedding);
  return embedding.index_select(0, tokens.reshape(-1)).view({tokens.size(0), tokens.size(1), -1});
}

torch::Tensor TransformerImpl::head_loss(const torch::Tensor& h, const torch::Tensor& targets,
                                         c10::ScalarType compute_dtype) {
  torch::Tensor normed;
  {
    PhaseScope phase(Phase::kNorm);
    normed = final_norm->forward(h, compute_dtype);
  }
  PhaseScope phase(Phase::kHead);
  const int64_t d = normed.size(-1);
  return linear_cross_entropy(normed.reshape({-1, d}), head.to(normed.scalar_type()),
                              targets.reshape(-1));
}

// Depth k sees positions 0 .. S-1-k: token t_{i+k} (targets[:, i+k-1]) in, and
// t_{i+k+1} (targets[:, i+k]) to predict.
void TransformerImpl::forward_mtp(torch::Tensor h, const torch::Tensor& targets,
                                  c10::ScalarType compute_dtype, ModelOutput& out) {
  const int64_t depth = int64_t(mtp->size()), seq = targets.size(1);
  if (seq <= depth) {
    throw InputError("model: train.mtp_depth = " + std::to_string(depth) +
                     " needs sequences of more than " + std::to_string(depth) + " tokens, got " +
                     std::to_string(seq));
  }
  for (int64_t k = 1; k <= depth; ++k) {
    const int64_t positions = seq - k;
    h = mtp[k - 1]->as<MtpModule>()->forward(
        h.narrow(1, 0, positions), embed(targets.narrow(1, k - 1, positions)), compute_dtype, out);
    out.mtp_ce.push_back(head_loss(h, targets.narrow(1, k, positions), compute_dtype));
  }
  out.mtp_loss = torch::stack(out.mtp_ce).sum() * (mtp_loss_weight_ / double(depth));
}

ModelOutput TransformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& targets) {
  if (tokens.dim() != 2 || tokens.size(1) > model_.seq_len) {
    throw InputError("model: expected tokens [batch, seq <= model.seq_len = " +
                     std::to_string(model_.seq_len) + "], got " + c10::str(tokens.sizes()));
  }
  const auto master = embedding.scalar_type();
  const bool bf16 = tokens.is_cuda() ? bf16_on_cuda_ : bf16_on_cpu_;
  const auto compute = bf16 ? torch::kBFloat16 : master;
  ModelOutput out;
  out.aux_loss = torch::zeros({}, embedding.options());
  out.z_loss = torch::zeros({}, embedding.options());
  out.mtp_loss = torch::zeros({}, embedding.options());
  torch::Tensor h = embed(tokens);
  for (auto& layer : *layers) h = layer->as<Block>()->forward(h, compute, out);
  if (targets.defined()) {
    out.lm_loss = head_loss(h, targets, compute);
    if (mtp) forward_mtp(h, targets, compute, out);
    return out;
  }
  torch::Tensor normed;
  {
    PhaseScope phase(Phase::kNorm);
    normed = final_norm->forward(h, compute);
  }
  PhaseScope phase(Phase::kHead);
  out.logits = project(normed, head);
  return out;
}

}  // namespace moelab
