#include "model/router.h"

#include <cmath>

#include "model/compute.h"
#include "util/error.h"

namespace moelab {

RouterImpl::RouterImpl(int64_t d_model, int64_t num_experts, int64_t top_k, std::string gate,
                       double capacity_factor)
    : num_experts_(num_experts),
      top_k_(top_k),
      gate_(std::move(gate)),
      capacity_factor_(capacity_factor) {
  if (gate_ != "topk_softmax" && gate_ != "full_softmax") {
    throw InputError("moe.gate: expected \"topk_softmax\" or \"full_softmax\", got \"" + gate_ +
                     "\"");
  }
  if (top_k_ < 1 || top_k_ > num_experts_) {
    throw InputError("moe.top_k: expected 1 <= top_k <= num_experts (" +
                     std::to_string(num_experts_) + "), got " + std::to_string(top_k_));
  }
  weight = register_parameter("weight", torch::empty({num_experts, d_model}));
}

RouterOutput RouterImpl::forward(const torch::Tensor& x) {
  const auto x_stat = x.scalar_type() == torch::kBFloat16 ? x.to(torch::kFloat32) : x;
  RouterOutput out;
  out.logits = project(x_stat, weight);
  out.probs = torch::softmax(out.logits, -1);
  auto [top_logits, top_ids] = out.logits.topk(top_k_, -1);
  out.expert_ids = top_ids;
  if (gate_ == "topk_softmax") {
    out.gates = torch::softmax(top_logits, -1);
  } else {
    out.gates = out.probs.gather(-1, top_ids);
  }
  if (capacity_factor_ > 0) {
    const int64_t assignments = x.size(0) * top_k_;
    const auto capacity = static_cast<int64_t>(
        std::ceil(capacity_factor_ * static_cast<double>(assignments) / num_experts_));
    out.kept_ids = apply_capacity(top_ids, num_experts_, capacity);
  } else {
    out.kept_ids = top_ids;
  }
  return out;
}

torch::Tensor apply_capacity(const torch::Tensor& expert_ids, int64_t num_experts,
                             int64_t capacity) {
  const auto flat = expert_ids.reshape(-1);  // token-major: (t0,s0), (t0,s1), (t1,s0), ...
  const auto one_hot = torch::one_hot(flat, num_experts);
  // 0-based arrival position of each assignment at its expert.
  const auto position = (one_hot.cumsum(0) - 1).gather(1, flat.unsqueeze(1)).squeeze(1);
  return torch::where(position < capacity, flat, torch::full_like(flat, -1))
      .view(expert_ids.sizes());
}

}  // namespace moelab
