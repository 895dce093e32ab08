#include "parallel/grad_clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace moelab {
namespace {

// Parameters with known gradients (one left without a gradient).
std::vector<torch::Tensor> params_with_grads(double scale) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> params;
  for (const auto& shape : {std::vector<int64_t>{3, 4}, {5}, {2, 2, 2}}) {
    torch::Tensor p = torch::zeros(shape, torch::requires_grad());
    p.mutable_grad() = torch::randn(shape) * scale;
    params.push_back(p);
  }
  params.push_back(torch::zeros({2}, torch::requires_grad()));
  return params;
}

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  return grads;
}

double local_grad_sq_norm(const std::vector<torch::Tensor>& params) {
  return grad_sq_norm_tensor(grads_of(params), torch::kCPU).item<double>();
}

double identity(double x) {
  return x;
}

// The pieces composed as ParallelPlan composes them: the local sum of squares,
// reduced over the ranks by `reduce_sum`, then clipping to the global norm.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const std::function<double(double)>& reduce_sum) {
  const double norm = std::sqrt(reduce_sum(local_grad_sq_norm(params)));
  clip_to_norm(grads_of(params), norm, max_norm);
  return norm;
}

TEST(GradClip, LocalSquaredNormIsTheSumOfSquares) {
  torch::Tensor p = torch::zeros({2}, torch::requires_grad());
  p.mutable_grad() = torch::tensor({3.0f, 4.0f});
  torch::Tensor q = torch::zeros({1}, torch::dtype(torch::kBFloat16).requires_grad(true));
  q.mutable_grad() = torch::tensor({12.0f}, torch::kBFloat16);
  EXPECT_DOUBLE_EQ(local_grad_sq_norm({p, q}), 9.0 + 16.0 + 144.0);
  EXPECT_DOUBLE_EQ(local_grad_sq_norm({}), 0.0);
}

TEST(GradClip, MatchesTorchWhenClipping) {
  const auto ours = params_with_grads(10.0);
  const auto reference = params_with_grads(10.0);
  const double norm = clip_grad_norm(ours, 1.0, identity);
  const double expected = torch::nn::utils::clip_grad_norm_(reference, 1.0);
  EXPECT_NEAR(norm, expected, 1e-4 * expected);
  EXPECT_GT(norm, 1.0);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::allclose(ours[i].grad(), reference[i].grad(), 1e-6, 1e-7)) << i;
  }
  EXPECT_NEAR(std::sqrt(local_grad_sq_norm(ours)), 1.0, 1e-5);
}

TEST(GradClip, LeavesSmallGradientsAlone) {
  const auto params = params_with_grads(1e-3);
  const torch::Tensor before = params[0].grad().clone();
  const double norm = clip_grad_norm(params, 1.0, identity);
  EXPECT_LT(norm, 1.0);
  EXPECT_TRUE(torch::equal(params[0].grad(), before));
}

TEST(GradClip, UsesTheReducedNorm) {
  // Two ranks with equal local sums: the global norm is sqrt(2) times the local one.
  const auto params = params_with_grads(1.0);
  const double local = std::sqrt(local_grad_sq_norm(params));
  const torch::Tensor before = params[0].grad().clone();
  const double norm = clip_grad_norm(params, local, [](double sum) { return 2.0 * sum; });
  EXPECT_NEAR(norm, std::sqrt(2.0) * local, 1e-9);
  EXPECT_TRUE(torch::allclose(params[0].grad(), before / std::sqrt(2.0), 1e-5));
}

TEST(GradClip, NonFiniteNormLeavesGradientsForTheCallerToSkip) {
  const auto params = params_with_grads(1.0);
  params[1].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  const torch::Tensor before = params[0].grad().clone();
  EXPECT_TRUE(std::isinf(clip_grad_norm(params, 1.0, identity)));
  EXPECT_TRUE(torch::equal(params[0].grad(), before));
}

TEST(GradClip, ZeroMaxNormOnlyMeasures) {
  const auto params = params_with_grads(10.0);
  const torch::Tensor before = params[0].grad().clone();
  EXPECT_GT(clip_grad_norm(params, 0.0, identity), 1.0);
  EXPECT_TRUE(torch::equal(params[0].grad(), before));
}

}  // namespace
}  // namespace moelab
