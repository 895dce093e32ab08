// DOT-MoE conversion: each dense FFN's hidden units are assigned to E experts
// by a learned, balanced optimal-transport assignment, and a router is learned
// with it, end to end on the language-model loss over a calibration stream.
//
// Per layer, two learned tensors: scores S [d_ff, E] and the router R [E, d].
// Each calibration forward of the layer's FFN (its weights frozen) computes
//   P = sinkhorn(S, temperature, sinkhorn_iterations)   rows 1, columns d_ff/E
//   H = one-hot of balanced_assignment(P)                every expert d_ff/E units
//   A = H + P - stop_gradient(P)                         straight-through: H forward,
//                                                        P's gradient backward
//   G [T, E] = top-k softmax gates of x R^T, zero off the top-k
//   y = W2 ((silu(W1 x) * W3 x) * top_k * (G A^T))       the MoE the split makes,
//                                                        w2 scaled by top_k as in
//                                                        `convert` (convert.h)
// plus the Switch balance loss (moe.aux_loss_coef) on R. Adam (no weight decay)
// updates S (lr_scores) and R (lr_router) for `steps` batches of the dense
// config's training data; every other weight stays frozen. S starts at the
// balanced k-means assignment (cluster_partition) as a one-hot times
// score_init, so calibration starts from the `cluster` split; R starts from
// normal(0, router_init_std). The result is H of the final S and R itself.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "convert/conversion_options.h"
#include "convert/dense_to_moe.h"

namespace moelab {

struct DotLayer {
  std::vector<int64_t> expert_of_unit;  // the balanced hard assignment
  torch::Tensor router;                 // [E, d] learned
};

struct DotResult {
  std::vector<DotLayer> layers;
  // Mean calibration LM loss over the first and the last quarter of the
  // batches (at least one each).
  double first_loss = 0;
  double last_loss = 0;
};

DotResult dot_calibrate(const DenseCheckpoint& dense, const DotOptions& options);

}  // namespace moelab
