// What the optimizer tests share: detached copies of parameters (to step a
// second optimizer from the same start) and the AdamW settings they step with.
#pragma once

#include "config/config.h"
#include "train/optimizer.h"

namespace moelab::testing {

inline NamedParams clone_params(const NamedParams& params) {
  NamedParams copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.detach().clone().requires_grad_());
  return copy;
}

// A large rate and decay, so a wrong update or decay rule shows in a few steps.
inline OptimConfig optimizer_test_config() {
  OptimConfig cfg;
  cfg.lr = 0.05;
  cfg.weight_decay = 0.3;
  return cfg;
}

}  // namespace moelab::testing
