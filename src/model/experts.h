// The routed experts this rank holds: SwiGLU FFNs (of one width, or of a width
// each for heterogeneous experts), each
// registered under its GLOBAL expert id ("<gid>.w1", ...), so parameter names
// (and checkpoints) do not depend on how experts are spread over ranks.
//
// In bf16 the experts run as grouped matmuls: one call per weight over every
// expert's rows, no padding (kernels/grouped_matmul.h). On CUDA that is
// LibTorch's _grouped_mm, which replaces 3 x E small kernels by 2. On a CPU with
// AVX512-BF16 it is moelab's own kernel, on AMX tiles where the CPU has them.
// 64 experts x 128, top-8, against the padded batched matmuls it replaced: 2x
// the step's tokens/s on an AMD EPYC (AVX512-BF16), 2.0-2.2x on an Intel Xeon
// with AMX, where oneDNN ran the batched matmuls at a quarter of its AMX peak.
// A CPU without native bf16 runs the padded batched matmuls, unless padding
// would more than quadruple the rows. fp32 (whose batched matmul measured
// slower than one GEMM per expert on the CPU), experts of different widths
// and widths not a multiple of 8 run one expert at a time.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/swiglu.h"
#include "model/token_dispatcher.h"

namespace moelab {

class ExpertsImpl : public torch::nn::Module {
 public:
  ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids);
  // widths[i]: the hidden width of the expert global_ids[i].
  ExpertsImpl(int64_t d_model, const std::vector<int64_t>& widths,
              const std::vector<int64_t>& global_ids);
  // Rows grouped by local expert (as a dispatcher returns them); outputs stay
  // in the same row order. Experts that got no rows still take part, so every
  // expert has a (zero) gradient.
  torch::Tensor forward(const DispatchedTokens& dispatched);
  // The same, one expert at a time: the reference for the grouped path.
  torch::Tensor forward_each(const DispatchedTokens& dispatched);
  // The same as grouped matmuls.
  torch::Tensor forward_grouped(const DispatchedTokens& dispatched);
  // The same as batched matmuls over [E, rows of the largest group, d], the
  // other groups padded with zero rows (experts of one width).
  torch::Tensor forward_padded(const DispatchedTokens& dispatched);

  const std::vector<int64_t>& global_ids() const { return global_ids_; }
  SwiGLU expert(size_t local_index) const { return experts_[local_index]; }

 private:
  void check_groups(const DispatchedTokens& dispatched) const;

  std::vector<int64_t> global_ids_;
  std::vector<SwiGLU> experts_;
};
TORCH_MODULE(Experts);

}  // namespace moelab
