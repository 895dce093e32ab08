#include "kernels/top_k.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/topk.h>

#include <cmath>
#include <vector>

namespace moelab {
namespace {

template <typename T>
bool ranks_above(T a, T b) {
  return a > b || (std::isnan(a) && !std::isnan(b));
}

// Keeps the best k seen so far in order; a value enters only by ranking
// strictly above one of them, so among equals the first seen stays ahead.
template <typename T>
void top_k_row(const T* v, int64_t cols, int64_t k, T* best, int64_t* index) {
  int64_t filled = 0;
  for (int64_t j = 0; j < cols; ++j) {
    if (filled == k && !ranks_above(v[j], best[k - 1])) continue;
    int64_t at = filled < k ? filled++ : k - 1;
    for (; at > 0 && ranks_above(v[j], best[at - 1]); --at) {
      best[at] = best[at - 1];
      index[at] = index[at - 1];
    }
    best[at] = v[j];
    index[at] = j;
  }
}

}  // namespace

at::Tensor top_k_indices(const at::Tensor& values_RC, int64_t k) {
  TORCH_CHECK(values_RC.dim() == 2 && k >= 1 && k <= values_RC.size(1),
              "top_k_indices: expected [rows, cols] values and 1 <= k <= cols, got ",
              values_RC.sizes(), " and k = ", k);
  const auto dtype = values_RC.scalar_type();
  if (!values_RC.is_cpu() || (dtype != at::kFloat && dtype != at::kDouble)) {
    return std::get<1>(values_RC.topk(k, -1));
  }
  const auto values = values_RC.contiguous();
  const int64_t rows = values.size(0), cols = values.size(1);
  auto index_RK = at::empty({rows, k}, values.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(dtype, "top_k_indices", [&] {
    const scalar_t* v = values.data_ptr<scalar_t>();
    int64_t* index = index_RK.data_ptr<int64_t>();
    at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> best(k);
      for (int64_t r = begin; r < end; ++r) {
        top_k_row(v + r * cols, cols, k, best.data(), index + r * k);
      }
    });
  });
  return index_RK;
}

}  // namespace moelab
