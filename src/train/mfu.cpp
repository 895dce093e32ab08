#include "train/mfu.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace moelab {

namespace {

using Clock = std::chrono::steady_clock;

void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Best seconds per product of two n x n matrices; stops early past `budget`.
double best_product_seconds(int64_t n, torch::ScalarType dtype, const torch::Device& device,
                            double budget) {
  const auto options = torch::dtype(dtype).device(device);
  const torch::Tensor a = torch::randn({n, n}, options);
  const torch::Tensor b = torch::randn({n, n}, options);
  torch::Tensor c = torch::matmul(a, b);  // warm-up: thread pool, packing buffers, kernels
  wait_for(device);
  double best = std::numeric_limits<double>::infinity();
  const auto loop_start = Clock::now();
  for (int repeat = 0;; ++repeat) {
    const auto start = Clock::now();
    torch::matmul_out(c, a, b);
    wait_for(device);
    const auto end = Clock::now();
    best = std::min(best, std::chrono::duration<double>(end - start).count());
    const double spent = std::chrono::duration<double>(end - loop_start).count();
    if ((repeat >= 2 && spent >= budget) || best > budget) break;
  }
  return best;
}

}  // namespace

double matmul_peak_flops(torch::ScalarType dtype, int threads, const torch::Device& device,
                         int64_t max_size, double seconds_per_size) {
  const int previous_threads = torch::get_num_threads();
  if (threads > 0 && !device.is_cuda()) torch::set_num_threads(threads);
  if (max_size <= 0) max_size = device.is_cuda() ? 8192 : 2048;
  torch::NoGradGuard no_grad;
  double peak = 0;
  for (int64_t n = 256; n <= max_size; n *= 2) {
    const double seconds = best_product_seconds(n, dtype, device, seconds_per_size);
    peak = std::max(peak, 2.0 * static_cast<double>(n) * n * n / seconds);
    if (seconds > seconds_per_size) break;
  }
  torch::set_num_threads(previous_threads);
  return peak;
}

}  // namespace moelab
