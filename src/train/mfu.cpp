#include "train/mfu.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "model/param_count.h"

namespace moelab {

double matmul_peak_flops(torch::ScalarType dtype, int threads, int64_t size, double min_seconds) {
  const int previous_threads = torch::get_num_threads();
  if (threads > 0) torch::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  const auto options = torch::dtype(dtype);
  const torch::Tensor a = torch::randn({size, size}, options);
  const torch::Tensor b = torch::randn({size, size}, options);
  torch::Tensor c = torch::matmul(a, b);  // warm-up: thread pool, packing buffers

  double best = std::numeric_limits<double>::infinity();
  const auto loop_start = std::chrono::steady_clock::now();
  for (int repeat = 0;; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    torch::matmul_out(c, a, b);
    const auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(end - start).count());
    if (repeat >= 2 && std::chrono::duration<double>(end - loop_start).count() >= min_seconds) {
      break;
    }
  }
  torch::set_num_threads(previous_threads);
  return 2.0 * static_cast<double>(size) * size * size / best;
}

double model_flops_per_token(const Config& cfg) {
  const ParamCounts counts = count_params(cfg);
  const double head_matmul = static_cast<double>(cfg.model.vocab_size) * cfg.model.d_model;
  const double non_embedding_active =
      static_cast<double>(counts.active - counts.embedding - counts.head) + head_matmul;
  const double attention_scores = 12.0 * cfg.model.n_layers * cfg.model.seq_len * cfg.model.d_model;
  return 6.0 * non_embedding_active + attention_scores;
}

}  // namespace moelab
