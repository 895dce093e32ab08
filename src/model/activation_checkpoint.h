// Activation checkpointing: a piece of the forward pass keeps only its inputs,
// and backward runs the piece again to get the activations its gradients need
// (a reentrant backward, as torch.utils.checkpoint's reentrant variant). It
// trades one more forward of the piece for the memory of its activations.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace moelab {

using CheckpointedPiece =
    std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

// piece(inputs), its activations freed and recomputed in backward. Outside grad
// mode (evaluation) it is piece(inputs). `piece` is called again in backward,
// so what it captures must outlive the step.
std::vector<torch::Tensor> checkpointed(const CheckpointedPiece& piece,
                                        const std::vector<torch::Tensor>& inputs);

// True while backward recomputes a piece: what a forward records besides its
// outputs (routing statistics, the aux-free bias's load) must be recorded by the
// first pass only.
bool recomputing();

}  // namespace moelab
