#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/rope.h"
#include "util/error.h"

namespace moelab {
namespace {

constexpr double kPi = 3.14159265358979323846;

// f_i as Llama 3.1 scales it: the clamp picks "kept" (a >= 1) and "divided" (a <= 0).
torch::Tensor llama3_frequencies(const torch::Tensor& freq, const RopeScaling& r) {
  const auto wavelength = 2 * kPi / freq;
  const auto kept = ((static_cast<double>(r.original_seq_len) / wavelength - r.low_freq_factor) /
                     (r.high_freq_factor - r.low_freq_factor))
                        .clamp(0.0, 1.0);
  return (1 - kept) * freq / r.factor + kept * freq;
}

// The (fractional) dimension whose pair turns `rotations` times over original_seq_len.
double yarn_dimension(double rotations, int64_t head_dim, double theta, const RopeScaling& r) {
  return static_cast<double>(head_dim) *
         std::log(static_cast<double>(r.original_seq_len) / (rotations * 2 * kPi)) /
         (2 * std::log(theta));
}

torch::Tensor yarn_frequencies(const torch::Tensor& freq, int64_t head_dim, double theta,
                               const RopeScaling& r) {
  double first = yarn_dimension(r.beta_fast, head_dim, theta, r);
  double last = yarn_dimension(r.beta_slow, head_dim, theta, r);
  if (r.truncate) {
    first = std::floor(first);
    last = std::ceil(last);
  }
  first = std::max(first, 0.0);
  last = std::min(last, static_cast<double>(head_dim - 1));
  if (first == last) last += 0.001;  // transformers' guard against an empty ramp
  const auto slowed =
      ((torch::arange(freq.size(0), freq.options()) - first) / (last - first)).clamp(0.0, 1.0);
  return freq * (1 - slowed) + freq / r.factor * slowed;
}

double yarn_mscale(double factor, double scale) {
  return factor <= 1 ? 1.0 : 0.1 * scale * std::log(factor) + 1.0;
}

// What cos and sin are multiplied by (1 but for yarn).
double attention_factor(const RopeScaling& r) {
  if (r.type != RopeScalingType::kYarn) return 1.0;
  if (r.attention_factor > 0) return r.attention_factor;
  if (r.mscale > 0 && r.mscale_all_dim > 0) {
    return yarn_mscale(r.factor, r.mscale) / yarn_mscale(r.factor, r.mscale_all_dim);
  }
  return yarn_mscale(r.factor, 1.0);
}

}  // namespace

RopeTables make_rope_tables(int64_t max_seq, int64_t head_dim, double theta,
                            const RopeScaling& scaling) {
  if (head_dim % 2 != 0) {
    throw InputError("model: RoPE needs an even head dimension, got " + std::to_string(head_dim));
  }
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto freq =
      torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  if (scaling.type == RopeScalingType::kLlama3) {
    freq = llama3_frequencies(freq, scaling);
  } else if (scaling.type == RopeScalingType::kYarn) {
    freq = yarn_frequencies(freq, head_dim, theta, scaling);
  }
  const auto angles = torch::outer(torch::arange(max_seq, opts), freq);  // [S, hd/2]
  const auto full = torch::cat({angles, angles}, -1);                    // [S, hd]
  const double m = attention_factor(scaling);
  return {full.cos() * m, full.sin() * m};
}

double latent_softmax_factor(const RopeScaling& scaling) {
  if (scaling.type != RopeScalingType::kYarn || scaling.mscale_all_dim <= 0) return 1.0;
  const double m = yarn_mscale(scaling.factor, scaling.mscale_all_dim);
  return m * m;
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables) {
  return rope(x, tables.cos, tables.sin);
}

}  // namespace moelab
