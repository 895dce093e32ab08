// The grouped (moelab's kernels on a CPU with AVX512-BF16 or AVX-512F,
// _grouped_mm elsewhere) and padded experts against one expert at a time: values and every
// gradient, with empty and uneven groups, on the CPU and (where present) CUDA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/experts.h"
#include "model/swiglu.h"

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
  // One gradient per expert and matrix: the rows of the stacks' gradients.
  for (const auto& p : experts->parameters()) {
    for (const auto& row : p.grad().unbind(0)) r.weight_grads.push_back(row.clone());
  }
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
  expect_path_equals_each(Path::kGrouped, torch::kCPU, torch::kFloat32);
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
  const auto params = experts->named_parameters();
  for (const auto& stacked : experts->stacked_params()) {
    for (size_t row = 0; row < stacked.row_names.size(); ++row) {
      if (stacked.row_names[row].rfind("1.", 0) != 0) continue;
      const auto grad = params[stacked.name].grad()[static_cast<int64_t>(row)];
      EXPECT_EQ(grad.abs().sum().item<double>(), 0.0) << stacked.row_names[row];
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

TEST(Experts, OneStackPerWidthWithItsRowsNamedByGlobalId) {
  torch::manual_seed(5);
  Experts experts(8, std::vector<int64_t>{16, 32, 16}, std::vector<int64_t>{5, 6, 7});
  ASSERT_EQ(experts->stacks().size(), 2u);
  EXPECT_EQ(experts->stacks()[0]->w1.sizes(), (std::vector<int64_t>{2, 16, 8}));
  EXPECT_EQ(experts->stacks()[1]->w2.sizes(), (std::vector<int64_t>{1, 8, 32}));
  const StackedParams stacked = experts->stacked_params();
  ASSERT_EQ(stacked.size(), 6u);
  EXPECT_EQ(stacked[0].name, "width_16.w1");
  EXPECT_EQ(stacked[0].row_names, (std::vector<std::string>{"5.w1", "7.w1"}));
  EXPECT_EQ(stacked[4].name, "width_32.w2");
  EXPECT_EQ(stacked[4].row_names, (std::vector<std::string>{"6.w2"}));
  init_weights(experts);
  EXPECT_TRUE(torch::equal(experts->expert(2).w1, experts->stacks()[0]->w1[1]));
  EXPECT_TRUE(torch::equal(experts->expert(1).w2, experts->stacks()[1]->w2[0]));
  // Each expert's rows go through its own matrices.
  const DispatchedTokens in{torch::randn({5, 8}), {2, 1, 2}};
  const auto out = experts->forward(in).split_with_sizes(in.counts);
  const auto rows = in.tokens.split_with_sizes(in.counts);
  for (size_t e = 0; e < 3; ++e) {
    const ExpertWeights w = experts->expert(e);
    EXPECT_TRUE(torch::allclose(out[e], swiglu_ffn(rows[e], w.w1, w.w2, w.w3))) << e;
  }
}

}  // namespace
}  // namespace moelab
