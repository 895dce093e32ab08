#include "model/experts.h"

#include <string>

#include "util/error.h"

namespace moelab {

ExpertsImpl::ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids)
    : global_ids_(global_ids) {
  for (int64_t gid : global_ids_) {
    experts_.push_back(register_module(std::to_string(gid), SwiGLU(d_model, d_expert)));
  }
}

torch::Tensor ExpertsImpl::forward(const DispatchedTokens& dispatched) {
  if (dispatched.counts.size() != experts_.size()) {
    throw std::logic_error("Experts: dispatcher returned " +
                           std::to_string(dispatched.counts.size()) + " groups for " +
                           std::to_string(experts_.size()) + " local experts");
  }
  // One split, not a narrow per expert: the backward of each narrow would
  // materialise a zero gradient the size of all the tokens (E of them a layer),
  // where split's backward concatenates the experts' gradients once.
  const std::vector<torch::Tensor> inputs =
      dispatched.tokens.split_with_sizes(dispatched.counts, 0);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(experts_.size());
  for (size_t e = 0; e < experts_.size(); ++e) outputs.push_back(experts_[e]->forward(inputs[e]));
  return torch::cat(outputs, 0);
}

}  // namespace moelab
