// Every path of the experts' GEMMs (model/expert_gemm.h) that runs on this CPU
// against one expert at a time in float64: values and every gradient, with
// empty and uneven groups, on the CPU and (where present) CUDA; and which path
// forward() takes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/expert_gemm.h"
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

// `rounding`: the dtype the output's cotangent is rounded to (the path's), so
// that the float64 reference gets the very same one.
Result run(Experts& experts, const DispatchedTokens& in, ExpertGemm path,
           c10::ScalarType rounding) {
  experts->zero_grad();
  experts->set_path(path);
  DispatchedTokens d{in.tokens.detach().clone().requires_grad_(true), in.counts};
  const auto out = experts->forward(d);
  // A weighted sum, so every output element has its own gradient.
  const auto weights = torch::arange(out.numel(), torch::kDouble).cos().to(rounding);
  (out * weights.to(out.options()).view(out.sizes())).sum().backward();
  Result r{out.detach().to(torch::kDouble), d.tokens.grad().to(torch::kDouble), {}};
  // One gradient per expert and matrix: the rows of the stacks' gradients.
  for (const auto& p : experts->parameters()) {
    for (const auto& row : p.grad().unbind(0)) r.weight_grads.push_back(row.to(torch::kDouble));
  }
  return r;
}

// bf16 rounds the inputs, weights and products' sums; fp32 only the sums.
void expect_close(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType dtype,
                  const std::string& what) {
  const double scale = b.abs().max().item<double>();
  const double tolerance = dtype == torch::kBFloat16 ? 2e-2 : 1e-5;
  EXPECT_LE((a - b).abs().max().item<double>(), tolerance * scale + 1e-6) << what;
}

void expect_path_equals_reference(ExpertGemm path, const torch::Device& device,
                                  c10::ScalarType dtype) {
  SCOPED_TRACE(choice_name(path) + " in " + c10::toString(dtype));
  torch::manual_seed(3);
  // Widths that are multiples of 16 take moelab's CPU kernel where the CPU has one.
  Experts experts(32, 16, std::vector<int64_t>{4, 9, 2, 7});
  init_weights(experts);
  Experts reference(32, 16, std::vector<int64_t>{4, 9, 2, 7});
  reference->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < experts->parameters().size(); ++i) {
      reference->parameters()[i].copy_(experts->parameters()[i]);
    }
  }
  experts->to(device);
  for (const std::vector<int64_t>& counts :
       {std::vector<int64_t>{3, 0, 5, 1}, {2, 2, 2, 2}, {0, 0, 4, 0}}) {
    int64_t rows = 0;
    for (int64_t c : counts) rows += c;
    // The reference multiplies the very numbers the path gets (bf16 inputs included).
    const auto x = torch::randn({rows, 32}).to(dtype);
    const Result expected =
        run(reference, {x.to(torch::kDouble), counts}, ExpertGemm::kPerExpert, dtype);
    const Result got = run(experts, {x.to(device), counts}, path, dtype);
    expect_close(got.out, expected.out, dtype, "output");
    expect_close(got.input_grad, expected.input_grad, dtype, "input gradient");
    ASSERT_EQ(got.weight_grads.size(), 12u);
    for (size_t i = 0; i < expected.weight_grads.size(); ++i) {
      expect_close(got.weight_grads[i].cpu(), expected.weight_grads[i], dtype,
                   "gradient of parameter " + std::to_string(i));
    }
  }
}

ExpertShape cpu_shape(c10::ScalarType dtype, int64_t width = 16) {
  return {32, {width}, 4, dtype, torch::kCPU};
}

TEST(Experts, EveryPathThisCpuRunsMatchesTheFloat64Reference) {
  for (const auto dtype : {torch::kBFloat16, torch::kFloat32}) {
    const auto paths = runnable_paths(cpu_shape(dtype));
    EXPECT_GE(paths.size(), 2u) << "per_expert and padded run everywhere";
    for (ExpertGemm path : paths) expect_path_equals_reference(path, torch::kCPU, dtype);
  }
}

// LibTorch's CUDA grouped GEMM is a different kernel from the CPU's loop over groups.
TEST(Experts, GroupedEqualsOneExpertAtATimeOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (ExpertGemm path : {ExpertGemm::kGrouped, ExpertGemm::kPadded}) {
    expect_path_equals_reference(path, torch::kCUDA, torch::kBFloat16);
  }
}

// The autograd node that made the output tells which path ran.
std::string last_node(Experts& experts, ExpertGemm path, c10::ScalarType dtype) {
  experts->set_path(path);
  const DispatchedTokens in{torch::randn({8, 32}).to(dtype).requires_grad_(), {2, 2, 2, 2}};
  return experts->forward(in).grad_fn()->name();
}

TEST(Experts, ForwardRunsThePathItWasGivenWhereThatPathRuns) {
  Experts experts(32, 16, std::vector<int64_t>{0, 1, 2, 3});
  EXPECT_EQ(last_node(experts, ExpertGemm::kPerExpert, torch::kFloat), "CatBackward0");
  EXPECT_EQ(last_node(experts, ExpertGemm::kPadded, torch::kFloat), "IndexSelectBackward0");
  if (can_run(ExpertGemm::kGrouped, cpu_shape(torch::kFloat))) {
    const std::string grouped = last_node(experts, ExpertGemm::kGrouped, torch::kFloat);
    EXPECT_NE(grouped, "CatBackward0");
    EXPECT_NE(grouped, "IndexSelectBackward0");
  }
  // A path that cannot run the tokens' dtype gives way to rule_path's.
  const auto rule = rule_path(cpu_shape(torch::kDouble));
  EXPECT_EQ(rule, ExpertGemm::kPerExpert);
  EXPECT_EQ(last_node(experts, ExpertGemm::kPadded, torch::kDouble), "CatBackward0");
}

TEST(Experts, EmptyExpertsGetZeroGradientsFromTheGroupedPath) {
  torch::manual_seed(4);
  Experts experts(16, 16, std::vector<int64_t>{0, 1});
  init_weights(experts);
  const DispatchedTokens in{torch::randn({3, 16}).to(torch::kBFloat16), {3, 0}};
  const Result r = run(experts, in, ExpertGemm::kGrouped, torch::kBFloat16);
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
