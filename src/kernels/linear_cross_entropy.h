// Mean cross-entropy of the logits hidden @ weight^T against targets, without
// ever holding all the logits: rows are taken `chunk_rows` at a time, each
// chunk's fp32 logits become its softmax gradient in place, and the input and
// weight gradients are accumulated right there by the two GEMMs the backward
// pass would run anyway. The backward pass only scales them. Saves the
// [tokens, vocab] logits, their fp32 copy, the softmax passes over them and the
// zero-filled gradient of the unfused loss; any device.
#pragma once

#include <torch/torch.h>

namespace moelab {

// hidden [N, d] and weight [V, d] in the compute dtype (fp32, bf16, double),
// targets [N] int64 with ignore_index rows left out of the mean, as
// torch::cross_entropy_loss does. Softmax statistics in fp32 (fp64 for double).
torch::Tensor linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t ignore_index = -100,
                                   int64_t chunk_rows = 0);  // 0: by device

// The plain LibTorch composition: the kernel's reference in tests.
torch::Tensor linear_cross_entropy_reference(const torch::Tensor& hidden,
                                             const torch::Tensor& weight,
                                             const torch::Tensor& targets,
                                             int64_t ignore_index = -100);

}  // namespace moelab
