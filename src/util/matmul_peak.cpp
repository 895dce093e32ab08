#include "util/matmul_peak.h"

#include <algorithm>
#include <limits>

#include "util/median.h"
#include "util/stopwatch.h"

namespace moelab {

namespace {

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
  const Stopwatch loop;
  for (int repeat = 0;; ++repeat) {
    Stopwatch product;
    torch::matmul_out(c, a, b);
    wait_for(device);
    best = std::min(best, product.seconds());
    if ((repeat >= 2 && loop.seconds() >= budget) || best > budget) break;
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

std::vector<double> cpu_matmul_flops_in_turn(const std::vector<torch::ScalarType>& dtypes,
                                             int64_t n, int rounds) {
  torch::NoGradGuard no_grad;
  std::vector<std::function<void()>> products;
  for (const auto dtype : dtypes) {
    const torch::Tensor a = torch::randn({n, n}, torch::dtype(dtype));
    const torch::Tensor b = torch::randn({n, n}, torch::dtype(dtype));
    torch::Tensor c = torch::empty({n, n}, torch::dtype(dtype));
    products.push_back([a, b, c]() mutable { torch::matmul_out(c, a, b); });
  }
  const Stopwatch since_start;
  std::vector<double> flops =
      median_seconds_in_turn(products, rounds, [&] { return since_start.seconds(); });
  for (double& seconds : flops) seconds = 2.0 * static_cast<double>(n) * n * n / seconds;
  return flops;
}

std::vector<double> median_seconds_in_turn(const std::vector<std::function<void()>>& tasks,
                                           int rounds, const std::function<double()>& clock) {
  std::vector<std::vector<double>> seconds(tasks.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const double start = clock();
      tasks[i]();
      seconds[i].push_back(clock() - start);
    }
  }
  std::vector<double> medians;
  for (const auto& times : seconds) medians.push_back(median(times));
  return medians;
}

}  // namespace moelab
