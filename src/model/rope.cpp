#include "model/rope.h"

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
  const int64_t seq = x.size(2);
  const int64_t half = x.size(3) / 2;
  const auto cos = tables.cos.slice(0, 0, seq).to(x.device(), x.scalar_type());
  const auto sin = tables.sin.slice(0, 0, seq).to(x.device(), x.scalar_type());
  const auto x1 = x.narrow(-1, 0, half);
  const auto x2 = x.narrow(-1, half, half);
  const auto rotated = torch::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

}  // namespace moelab
