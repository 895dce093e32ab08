#include "model/rope.h"

#include "kernels/rope.h"
#include "util/error.h"

namespace moelab {

RopeTables make_rope_tables(int64_t max_seq, int64_t head_dim, double theta) {
  if (head_dim % 2 != 0) {
    throw InputError("model: RoPE needs an even head dimension (d_model / n_heads), got " +
                     std::to_string(head_dim));
  }
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const auto inv_freq =
      torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  const auto angles = torch::outer(torch::arange(max_seq, opts), inv_freq);  // [S, hd/2]
  const auto full = torch::cat({angles, angles}, -1);                        // [S, hd]
  return {full.cos(), full.sin()};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables) {
  return rope(x, tables.cos, tables.sin);
}

}  // namespace moelab
