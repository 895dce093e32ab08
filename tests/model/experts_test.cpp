// The grouped (bf16: moelab's kernel on a CPU with AVX512-BF16, _grouped_mm
// elsewhere) and padded experts against one expert at a time: values and every
// gradient, with empty and uneven groups, on the CPU and (where present) CUDA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/experts.h"

namespace moelab {
namespace {

struct Result {
  torch::Tensor out, input_grad;
  std::vector<torch::Tensor> weight_grads;
};

void init_weights(Experts& experts) {
  torch::NoGradGuard no_grad;
  for (auto& p : experts->parameters()) p.normal_(0.0, 0.5);
}

enum class Path { kEach, kGrouped, kPadded };

Result run(Experts& experts, const DispatchedTokens& in, Path path) {
  experts->zero_grad();
  DispatchedTokens d{in.tokens.detach().clone().requires_grad_(true), in.counts};
  const auto out = path == Path::kGrouped  ? experts->forward_grouped(d)
                   : path == Path::kPadded ? experts->forward_padded(d)
                                           : experts->forward_each(d);
  // A weighted sum, so every output element has its own gradient.
  (out * torch::arange(out.numel(), out.options()).view(out.sizes()).cos()).sum().backward();
  Result r{out.detach().to(torch::kFloat32), d.tokens.grad().to(torch::kFloat32), {}};
  for (const auto& p : experts->parameters()) r.weight_grads.push_back(p.grad().clone());
  return r;
}

// Both paths multiply the same bf16 numbers; only the summation order (and so
// the last bf16 bit) may differ.
void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  const double scale = b.abs().max().item<double>();
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-2 * scale + 1e-6) << what;
}

void expect_path_equals_each(Path path, const torch::Device& device, c10::ScalarType dtype) {
  torch::manual_seed(3);
  // Widths that are multiples of 16 take moelab's CPU kernel where the CPU has one.
  Experts experts(32, 16, std::vector<int64_t>{4, 9, 2, 7});
  init_weights(experts);
  experts->to(device);
  for (const std::vector<int64_t>& counts :
       {std::vector<int64_t>{3, 0, 5, 1}, {2, 2, 2, 2}, {0, 0, 4, 0}}) {
    int64_t rows = 0;
    for (int64_t c : counts) rows += c;
    const DispatchedTokens in{torch::randn({rows, 32}).to(device, dtype), counts};
    const Result each = run(experts, in, Path::kEach);
    const Result grouped = run(experts, in, path);
    expect_close(grouped.out, each.out, "output");
    expect_close(grouped.input_grad, each.input_grad, "input gradient");
    ASSERT_EQ(grouped.weight_grads.size(), 12u);
    for (size_t i = 0; i < each.weight_grads.size(); ++i) {
      expect_close(grouped.weight_grads[i], each.weight_grads[i],
                   "gradient of parameter " + std::to_string(i));
    }
  }
}

TEST(Experts, GroupedEqualsOneExpertAtATime) {
  expect_path_equals_each(Path::kGrouped, torch::kCPU, torch::kBFloat16);
}

TEST(Experts, PaddedEqualsOneExpertAtATime) {
  expect_path_equals_each(Path::kPadded, torch::kCPU, torch::kBFloat16);
  expect_path_equals_each(Path::kPadded, torch::kCPU, torch::kFloat32);
}

// LibTorch's CUDA grouped GEMM is a different kernel from the CPU's loop over groups.
TEST(Experts, GroupedEqualsOneExpertAtATimeOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_path_equals_each(Path::kGrouped, torch::kCUDA, torch::kBFloat16);
}

TEST(Experts, EmptyExpertsGetZeroGradientsFromTheGroupedPath) {
  torch::manual_seed(4);
  Experts experts(16, 16, std::vector<int64_t>{0, 1});
  init_weights(experts);
  const DispatchedTokens in{torch::randn({3, 16}).to(torch::kBFloat16), {3, 0}};
  const Result r = run(experts, in, Path::kGrouped);
  const auto names = experts->named_parameters();
  for (const auto& p : names) {
    if (p.key().rfind("1.", 0) == 0) {
      EXPECT_EQ(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    }
  }
  EXPECT_EQ(r.out.size(0), 3);
}

TEST(Experts, UnalignedWidthsFallBackToOneExpertAtATime) {
  Experts experts(6, 4, std::vector<int64_t>{0, 1});  // bf16 rows of 12 and 8 bytes
  init_weights(experts);
  const DispatchedTokens in{torch::randn({3, 6}).to(torch::kBFloat16), {1, 2}};
  EXPECT_TRUE(torch::equal(experts->forward(in), experts->forward_each(in)));
}

}  // namespace
}  // namespace moelab
