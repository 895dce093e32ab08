#include "model/mtp.h"

#include "model/compute.h"
#include "model/phase_timer.h"

namespace moelab {

ModelSettings mtp_block_settings(const ModelSettings& settings) {
  ModelSettings dense = settings;
  dense.moe.enabled = false;
  if (dense.checkpointing == ActivationCheckpointing::kMoe) {
    dense.checkpointing = ActivationCheckpointing::kNone;  // no MoE FFN to recompute
  }
  return dense;
}

MtpModuleImpl::MtpModuleImpl(const ModelSettings& settings) {
  const ModelConfig& m = settings.model;
  enorm = register_module("enorm", RMSNorm(m.d_model, m.norm_eps));
  hnorm = register_module("hnorm", RMSNorm(m.d_model, m.norm_eps));
  proj = register_parameter("proj", torch::empty({m.d_model, 2 * m.d_model}));
  block = register_module("block", Block(mtp_block_settings(settings), /*layer=*/0, MoeContext{}));
}

torch::Tensor MtpModuleImpl::forward(const torch::Tensor& h_prev,
                                     const torch::Tensor& next_embedding,
                                     c10::ScalarType compute_dtype, ModelOutput& out) {
  torch::Tensor joined;
  {
    PhaseScope phase(Phase::kNorm);
    joined = torch::cat(
        {enorm->forward(next_embedding, compute_dtype), hnorm->forward(h_prev, compute_dtype)}, -1);
  }
  const auto h = project(joined, proj).to(h_prev.scalar_type());
  return block->forward(h, compute_dtype, out);
}

}  // namespace moelab
