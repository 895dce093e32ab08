// A choice each rank makes on its own from a measurement (the experts' GEMM
// path, "auto" precision on a CPU), which ranks could make differently by a
// hair: every rank takes rank 0's, so that all run alike.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "comm/communicator.h"

namespace moelab {

// Rank 0's `mine` (an enum), on every rank of `world` (collective).
template <typename Choice>
Choice rank0s_choice(Choice mine, Communicator& world) {
  auto value = torch::tensor({static_cast<int64_t>(mine)});
  world.broadcast(value, 0);
  return static_cast<Choice>(value.item<int64_t>());
}

}  // namespace moelab
