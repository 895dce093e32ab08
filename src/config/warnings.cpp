#include "config/warnings.h"

namespace moelab {

std::vector<std::string> config_warnings(const Config& cfg) {
  std::vector<std::string> warnings;
  // Normalised over one expert, every gate is 1: no gradient of the language
  // model's loss reaches the router, which learns from the balance losses only.
  if (cfg.moe.enabled && cfg.moe.top_k == 1 && cfg.moe.gate == Gate::kTopkSoftmax) {
    warnings.push_back(
        "moe.top_k = 1 with moe.gate = \"topk_softmax\": every gate is 1, so the router "
        "learns from the balance losses only, never from the language-model loss; top-1 "
        "routing as Switch trains it is moe.gate = \"full_softmax\"");
  }
  return warnings;
}

}  // namespace moelab
