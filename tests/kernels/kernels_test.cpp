// Each CPU kernel against the plain LibTorch composition it replaces: values
// and gradients, in the dtypes the model uses (fp32, bf16 with fp32 math,
// double), on strided inputs like the model's, and on empty inputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/grouped_gemm.h"
#include "kernels/grouped_matmul.h"
#include "kernels/linear_cross_entropy.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/route_counts.h"
#include "kernels/slot_sum.h"
#include "kernels/softmax_route.h"
#include "kernels/swiglu.h"
#include "kernels/top_k.h"

namespace moelab {
namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(c10::ScalarType dtype) {
  if (dtype == torch::kBFloat16) return {2e-2, 2e-2};
  if (dtype == torch::kFloat32) return {1e-5, 1e-5};
  return {1e-12, 1e-12};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  EXPECT_TRUE(
      torch::allclose(got.to(torch::kFloat64), want.to(torch::kFloat64), tol.rtol, tol.atol))
      << what << ": max abs diff "
      << (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>();
}

// Runs f (fused) and ref on copies of the same leaf inputs, backpropagates the
// same random output gradient, and compares outputs and every input gradient.
void expect_same_as_reference(
    const std::vector<torch::Tensor>& inputs,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& ref, Tolerance tol,
    const std::string& what) {
  auto leaves = [&] {
    std::vector<torch::Tensor> out;
    for (const auto& t : inputs) out.push_back(t.detach().clone().requires_grad_(true));
    return out;
  };
  auto fused_in = leaves(), ref_in = leaves();
  const auto y = f(fused_in), y_ref = ref(ref_in);
  expect_close(y, y_ref, tol, what + " output");
  const auto grad =
      torch::randn(y_ref.sizes(), torch::TensorOptions(torch::kFloat64)).to(y_ref.scalar_type());
  y.backward(grad);
  y_ref.backward(grad);
  for (size_t i = 0; i < inputs.size(); ++i) {
    expect_close(fused_in[i].grad(), ref_in[i].grad(), tol,
                 what + " gradient of input " + std::to_string(i));
  }
}

// RoPE tables [seq, hd] with equal halves, as model/rope.h makes them.
std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t seq, int64_t hd) {
  const auto opts = torch::TensorOptions(torch::kFloat64);
  const auto inv_freq = torch::pow(10000.0, -torch::arange(0, hd, 2, opts) / double(hd));
  const auto angles = torch::outer(torch::arange(seq, opts), inv_freq);
  const auto full = torch::cat({angles, angles}, -1);
  return {full.cos(), full.sin()};
}

class KernelsTest : public ::testing::TestWithParam<c10::ScalarType> {
 protected:
  void SetUp() override { torch::manual_seed(7); }
  torch::Tensor randn(torch::IntArrayRef sizes) const {
    return torch::randn(sizes, torch::TensorOptions(torch::kFloat64)).to(GetParam());
  }
};

TEST_P(KernelsTest, RmsNormMatchesComposition) {
  const auto dtype = GetParam();
  const auto x = randn({3, 5, 48}) * 3;
  const auto w = 1 + randn({48}) * 0.1;
  std::vector<c10::ScalarType> outs = {dtype};
  if (dtype != torch::kBFloat16) outs.push_back(torch::kBFloat16);
  for (const auto out : outs) {
    expect_same_as_reference(
        {x, w}, [&](const auto& in) { return rms_norm(in[0], in[1], 1e-5, out); },
        [&](const auto& in) { return rms_norm_reference(in[0], in[1], 1e-5, out); },
        tolerance(out == torch::kBFloat16 ? out : dtype),
        "rms_norm " + std::string(c10::toString(dtype)) + " -> " + c10::toString(out));
  }
}

TEST_P(KernelsTest, RopeMatchesCompositionOnHeadViewsOfAFusedProjection) {
  const int64_t batch = 2, seq = 7, heads = 3, hd = 8;
  const auto [cos, sin] = rope_tables(16, hd);
  // As in attention: heads viewed out of a [B, S, 3 * H * hd] projection.
  const auto qkv = randn({batch, seq, 3 * heads * hd});
  const auto q =
      qkv.narrow(-1, heads * hd, heads * hd).view({batch, seq, heads, hd}).transpose(1, 2);
  ASSERT_FALSE(q.is_contiguous());
  expect_same_as_reference(
      {q}, [&](const auto& in) { return rope(in[0], cos, sin); },
      [&](const auto& in) { return rope_reference(in[0], cos, sin); }, tolerance(GetParam()),
      "rope");
  EXPECT_TRUE(rope(q, cos, sin).is_contiguous());
}

TEST_P(KernelsTest, SwigluMatchesComposition) {
  // Wide enough that the activation's tails (silu of large |a|) are covered.
  const auto gate_up = randn({2, 9, 2 * 40}) * 6;
  expect_same_as_reference(
      {gate_up}, [](const auto& in) { return swiglu(in[0]); },
      [](const auto& in) { return swiglu_reference(in[0]); }, tolerance(GetParam()), "swiglu");
}

TEST_P(KernelsTest, SwigluClampsExpAtBothEndsAndPassesNanThrough) {
  // Gates far past exp's range (the kernel clamps its argument to [-87, 88])
  // at every position of a row, in the vector loop's lanes and in its tail.
  const int64_t h = 40;
  const auto far = torch::tensor({-1000.0, -100.0, -88.5, 89.0, 100.0, 1000.0}, torch::kFloat64);
  const auto a = far.repeat(h).narrow(0, 0, 3 * h).view({3, h});
  const auto gate_up = torch::cat({a, randn({3, h}).to(torch::kFloat64)}, -1).to(GetParam());
  expect_same_as_reference(
      {gate_up}, [](const auto& in) { return swiglu(in[0]); },
      [](const auto& in) { return swiglu_reference(in[0]); }, tolerance(GetParam()),
      "swiglu far from zero");

  auto with_nan = gate_up.clone();
  with_nan.index_put_({1, 7}, std::numeric_limits<double>::quiet_NaN());
  const auto y = swiglu(with_nan);
  EXPECT_TRUE(torch::isnan(y[1][7]).item<bool>());
  EXPECT_EQ(torch::isnan(y).sum().item<int64_t>(), 1);
}

TEST_P(KernelsTest, LinearCrossEntropyMatchesCompositionAcrossChunks) {
  const int64_t rows = 23, d = 16, vocab = 37;
  const auto hidden = randn({rows, d});
  const auto weight = randn({vocab, d});
  auto targets = torch::randint(0, vocab, {rows}, torch::kLong);
  targets.index_put_({torch::tensor({3, 4, 20})}, -100);  // ignored, as padding would be
  // One chunk, chunks that divide the rows unevenly, and one row at a time.
  for (const int64_t chunk : {int64_t{0}, int64_t{5}, int64_t{1}}) {
    expect_same_as_reference(
        {hidden, weight},
        [&](const auto& in) { return linear_cross_entropy(in[0], in[1], targets, -100, chunk); },
        [&](const auto& in) { return linear_cross_entropy_reference(in[0], in[1], targets); },
        tolerance(GetParam()), "linear_cross_entropy chunk " + std::to_string(chunk));
  }
  // Without a backward to follow (evaluation), the same loss.
  torch::NoGradGuard no_grad;
  expect_close(linear_cross_entropy(hidden, weight, targets, -100, 5),
               linear_cross_entropy_reference(hidden, weight, targets), tolerance(GetParam()),
               "linear_cross_entropy without gradients");
}

// The MoE layer's combine: each slot's expert output read where the dispatch
// put it (index [T, k] a permutation of the rows; an index of N or more a
// dropped slot), weighted by gates [T, k]. Every row named; three slots dropped;
// two rows named by no slot (their gradient is zero).
TEST_P(KernelsTest, GatherWeightedSlotSumMatchesGatherAndBmm) {
  const auto dtype = GetParam();
  for (const int64_t k : {1, 2, 8}) {
    const int64_t tokens = 9, slots = tokens * k;
    const auto index = torch::randperm(slots, torch::kLong).view({tokens, k});
    for (const int64_t n : {slots, slots - 3, slots + 2}) {
      expect_same_as_reference(
          {randn({n, 24}), randn({tokens, k})},
          [&](const auto& in) { return gather_weighted_slot_sum(in[0], index, in[1]); },
          [&](const auto& in) { return gather_weighted_slot_sum_reference(in[0], index, in[1]); },
          tolerance(dtype),
          "gather_weighted_slot_sum k=" + std::to_string(k) + " rows " + std::to_string(n));
    }
  }
}

// The gradient of a token's row gathered once per slot: rows indexed past the
// last (N = 13 here) are dropped slots and add nothing.
TEST_P(KernelsTest, GatherSlotSumMatchesIndexingAndSumming) {
  const auto dtype = GetParam();
  const auto rows = randn({13, 20});
  const auto index = torch::randint(0, 16, {9, 3}, torch::kLong);
  const auto padded = torch::cat({rows, torch::zeros({3, 20}, rows.options())});
  const auto want =
      padded.to(torch::kFloat64).index_select(0, index.reshape(-1)).view({9, 3, 20}).sum(1);
  expect_close(gather_slot_sum(rows, index), want.to(dtype), tolerance(dtype), "gather_slot_sum");
}

TEST_P(KernelsTest, EmptyInputsGiveEmptyOutputsAndGradients) {
  // An expert that received no tokens runs on zero rows.
  const auto [cos, sin] = rope_tables(4, 8);
  expect_same_as_reference(
      {randn({0, 16})}, [](const auto& in) { return swiglu(in[0]); },
      [](const auto& in) { return swiglu_reference(in[0]); }, tolerance(GetParam()), "swiglu");
  expect_same_as_reference(
      {randn({0, 8}), randn({8})},
      [&](const auto& in) { return rms_norm(in[0], in[1], 1e-5, GetParam()); },
      [&](const auto& in) { return rms_norm_reference(in[0], in[1], 1e-5, GetParam()); },
      tolerance(GetParam()), "rms_norm");
  expect_same_as_reference(
      {randn({0, 2, 3, 8})}, [&](const auto& in) { return rope(in[0], cos, sin); },
      [&](const auto& in) { return rope_reference(in[0], cos, sin); }, tolerance(GetParam()),
      "rope");
}

// Expert groups as the model makes them: one empty, one of one row, odd sizes
// (the weight gradient pairs rows), one over a parallel block of rows; the
// weights a transposed view of an [E, out, in] stack. N = 96 runs every GEMM on
// AMX tiles where the CPU has them (their reduction a multiple of 32); N = 80
// leaves a tile of 16 columns and a backward dx that AMX cannot reduce, so it
// runs on the AVX512-BF16 tiles. Both micro-kernels run everything again when
// pinned. The reference runs in double and rounds once to bf16, as the kernel
// (fp32 accumulation) does.
// Where the CPU has no AVX512-BF16, every case checks the _grouped_mm path.
TEST(GroupedMatmulTest, MatchesOneDoubleMatmulPerGroupInBf16) {
  torch::manual_seed(3);
  const std::vector<int64_t> counts = {5, 0, 1, 50, 6, 71};
  const int64_t rows = 133;
  const auto bf16 = torch::TensorOptions(torch::kBFloat16);
  // K = 48: 24 pairs, a block of 16 transposed in registers and 8 by word.
  for (const auto& [tiles, k] : std::vector<std::pair<CpuTiles, int64_t>>{
           {CpuTiles::kBest, 64}, {CpuTiles::kAvx512Dot, 64}, {CpuTiles::kBest, 48}}) {
    // 24: not a multiple of 16: _grouped_mm.
    for (const int64_t columns : {int64_t{96}, int64_t{80}, int64_t{24}}) {
      expect_same_as_reference(
          {torch::randn({rows, k}, bf16), torch::randn({6, columns, k}, bf16)},
          [&](const auto& in) {
            return grouped_matmul(in[0], in[1].transpose(1, 2), counts, tiles);
          },
          [&](const auto& in) {
            return grouped_matmul_reference(in[0].to(torch::kFloat64),
                                            in[1].transpose(1, 2).to(torch::kFloat64), counts)
                .to(torch::kBFloat16);
          },
          {1e-2, 2e-2},
          "grouped_matmul K=" + std::to_string(k) + " N=" + std::to_string(columns) +
              (tiles == CpuTiles::kBest ? " (best tiles)" : " (AVX512-BF16 tiles)"));
    }
  }
}

// Weight parts side by side (the experts' gate and up), fp32 master weights
// rounded to bf16 as they are packed: the same bits as the bf16 kernel on the
// joined bf16 weight, forward and dx, and fp32 weight gradients that round to
// its bf16 ones. One part a transposed view of [E, N, K] (as the experts'
// stacks), one a contiguous [E, K, N] (each packing path both ways), and one
// with no unit stride (cast to bf16 before packing). A group of 300 rows (150
// pairs) takes the AVX512-BF16 tiles' fp32 weight gradients over two passes
// (kReductionPass), the second carrying on from the first's sums.
TEST(GroupedMatmulTest, Fp32PartsGiveTheJoinedBf16WeightsBits) {
  if (!grouped_matmul_has_cpu_kernel(torch::kBFloat16)) GTEST_SKIP() << "no AVX512-BF16";
  torch::manual_seed(5);
  struct Case {
    CpuTiles tiles;
    int64_t k;
    std::vector<int64_t> counts;
  };
  const std::vector<int64_t> few = {5, 0, 1, 50, 6, 71};
  for (const auto& [tiles, k, counts] :
       std::vector<Case>{{CpuTiles::kBest, 64, few},
                         {CpuTiles::kAvx512Dot, 64, few},
                         {CpuTiles::kBest, 48, few},
                         {CpuTiles::kAvx512Dot, 64, {5, 0, 300}}}) {
    SCOPED_TRACE("K " + std::to_string(k) + (tiles == CpuTiles::kBest ? " best" : " AVX512-BF16") +
                 ", " + std::to_string(counts.size()) + " groups");
    const auto groups = static_cast<int64_t>(counts.size());
    const auto x = torch::randn({std::accumulate(counts.begin(), counts.end(), int64_t{0}), k})
                       .to(torch::kBFloat16);
    const auto gate = torch::randn({groups, 32, k}).requires_grad_(true);  // [E, N, K]
    const auto up = torch::randn({groups, k, 48}).requires_grad_(true);    // [E, K, N]
    const auto spaced = torch::randn({groups, 2 * k, 64}).requires_grad_(true);
    const auto every_other = [&](const auto& t) {  // [E, K, 32]: strides 128 and 2
      return t.slice(1, 0, 2 * k, 2).slice(2, 0, 64, 2);
    };
    ASSERT_TRUE(every_other(spaced).stride(1) != 1 && every_other(spaced).stride(2) != 1);
    const auto x_parts = x.clone().requires_grad_(true);
    const auto y =
        grouped_matmul(x_parts, {gate.transpose(1, 2), up, every_other(spaced)}, counts, tiles);

    const auto joined =
        torch::cat({gate.detach().transpose(1, 2), up.detach(), every_other(spaced.detach())}, 2)
            .to(torch::kBFloat16);
    const auto w = joined.clone().requires_grad_(true);
    const auto x_joined = x.clone().requires_grad_(true);
    const auto want = grouped_matmul(x_joined, w, counts, tiles);
    ASSERT_TRUE(torch::equal(y, want));

    const auto dy = torch::randn(want.sizes()).to(torch::kBFloat16);
    y.backward(dy);
    want.backward(dy);
    EXPECT_TRUE(torch::equal(x_parts.grad(), x_joined.grad()));
    // fp32 sums stored as they are, not rounded to bf16 first.
    EXPECT_FALSE(torch::equal(gate.grad(), gate.grad().to(torch::kBFloat16).to(torch::kFloat)));
    EXPECT_TRUE(
        torch::equal(gate.grad().transpose(1, 2).to(torch::kBFloat16), w.grad().narrow(2, 0, 32)));
    EXPECT_TRUE(torch::equal(up.grad().to(torch::kBFloat16), w.grad().narrow(2, 32, 48)));
    EXPECT_TRUE(
        torch::equal(every_other(spaced.grad()).to(torch::kBFloat16), w.grad().narrow(2, 80, 32)));
  }
}

// With many more groups than threads, the bf16 kernel's backward takes the
// groups a chunk at a time (kChunkBytes of their rows of x and dy), each chunk
// whole on one thread: 40 groups of x and dy 1 KB a row make about 20 chunks
// over 2 threads, with an empty group and odd sizes among them. Every group's
// dx and weight gradients are the same bits as the group's own backward, run
// alone (one chunk, on every thread); fp32 master weights in two parts, as the
// experts' gate and up, on both micro-kernels.
TEST(GroupedMatmulTest, Bf16BackwardInChunksGivesEachGroupsOwnGradients) {
  if (!grouped_matmul_has_cpu_kernel(torch::kBFloat16)) GTEST_SKIP() << "no AVX512-BF16";
  torch::manual_seed(8);
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  const int64_t k = 256, groups = 40;
  std::vector<int64_t> counts;
  for (int64_t g = 0; g < groups; ++g) counts.push_back(g == 5 ? 0 : 480 + 13 * (g % 5));
  const int64_t rows = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (const CpuTiles tiles : {CpuTiles::kBest, CpuTiles::kAvx512Dot}) {
    SCOPED_TRACE(tiles == CpuTiles::kBest ? "best tiles" : "AVX512-BF16 tiles");
    const auto x = torch::randn({rows, k}).to(torch::kBFloat16).requires_grad_(true);
    const auto gate = torch::randn({groups, 128, k}).requires_grad_(true);  // [E, N, K]
    const auto up = torch::randn({groups, 128, k}).requires_grad_(true);
    const auto dy = torch::randn({rows, 256}).to(torch::kBFloat16);
    grouped_matmul(x, {gate.transpose(1, 2), up.transpose(1, 2)}, counts, tiles).backward(dy);
    int64_t row = 0;
    for (int64_t g = 0; g < groups; ++g) {
      SCOPED_TRACE("group " + std::to_string(g));
      const auto alone = [&](const torch::Tensor& t) {
        return t.detach().narrow(0, g, 1).clone().requires_grad_(true);
      };
      const auto x_g = x.detach().narrow(0, row, counts[g]).clone().requires_grad_(true);
      const auto gate_g = alone(gate), up_g = alone(up);
      grouped_matmul(x_g, {gate_g.transpose(1, 2), up_g.transpose(1, 2)}, {counts[g]}, tiles)
          .backward(dy.narrow(0, row, counts[g]));
      if (counts[g] > 0) {
        EXPECT_TRUE(torch::equal(x.grad().narrow(0, row, counts[g]), x_g.grad()));
      }
      EXPECT_TRUE(torch::equal(gate.grad().narrow(0, g, 1), gate_g.grad()));
      EXPECT_TRUE(torch::equal(up.grad().narrow(0, g, 1), up_g.grad()));
      row += counts[g];
    }
  }
  at::set_num_threads(threads);
}

// The fp32 kernel (AVX-512F CPUs) on the same groups: N = 96 and 80 leave
// tiles of 32 and 16 columns, K = 48 a dx with one of 48. Then reductions
// longer than one pass of the tiles (kReductionPass, 128 steps): K = 160 in
// the forward, a group of 300 rows in the weight gradient (three passes).
// Against double, to fp32 rounding (a sum of 300 products rounds further).
TEST(GroupedMatmulTest, MatchesOneDoubleMatmulPerGroupInFp32) {
  if (!grouped_matmul_has_cpu_kernel(torch::kFloat)) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(3);
  const std::vector<int64_t> few = {5, 0, 1, 50, 6, 71}, long_group = {5, 0, 300};
  for (const auto& [groups_k, k] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {few, 64}, {few, 48}, {long_group, 160}}) {
    const std::vector<int64_t>& counts = groups_k;  // a name the lambdas can capture
    const int64_t rows = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const auto groups = static_cast<int64_t>(counts.size());
    for (const int64_t columns : {int64_t{96}, int64_t{80}}) {
      expect_same_as_reference(
          {torch::randn({rows, k}), torch::randn({groups, columns, k})},
          [&](const auto& in) { return grouped_matmul(in[0], in[1].transpose(1, 2), counts); },
          [&](const auto& in) {
            return grouped_matmul_reference(in[0].to(torch::kFloat64),
                                            in[1].transpose(1, 2).to(torch::kFloat64), counts)
                .to(torch::kFloat);
          },
          {1e-5, rows > 200 ? 2e-4 : 1e-5},
          "grouped_matmul fp32 K=" + std::to_string(k) + " N=" + std::to_string(columns));
    }
  }
}

// The fp32 kernel's weight parts side by side (the experts' gate and up, as
// grouped_matmul takes them in fp32): the same bits as the joined weight,
// forward, dx and each part's gradient. One part a transposed view of
// [E, N, K] (transposed into B's rows 16 x 16 at a time), one a contiguous
// [E, K, N] and one with no unit stride (both copied by LibTorch).
TEST(GroupedMatmulTest, Fp32PartsGiveTheJoinedWeightsBits) {
  if (!grouped_matmul_has_cpu_kernel(torch::kFloat)) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(7);
  const std::vector<int64_t> counts = {5, 0, 1, 50, 6, 71};
  const int64_t k = 48;
  const auto x = torch::randn({133, k});
  const auto gate = torch::randn({6, 32, k}).requires_grad_(true);  // [E, N, K]
  const auto up = torch::randn({6, k, 48}).requires_grad_(true);    // [E, K, N]
  const auto spaced = torch::randn({6, 2 * k, 32}).requires_grad_(true);
  const auto every_other = [&](const auto& t) { return t.slice(1, 0, 2 * k, 2); };  // [E, K, 32]
  const auto x_parts = x.clone().requires_grad_(true);
  const auto y = grouped_matmul(x_parts, {gate.transpose(1, 2), up, every_other(spaced)}, counts);

  const auto w =
      torch::cat({gate.detach().transpose(1, 2), up.detach(), every_other(spaced.detach())}, 2)
          .requires_grad_(true);
  const auto x_joined = x.clone().requires_grad_(true);
  const auto want = grouped_matmul(x_joined, w, counts);
  ASSERT_TRUE(torch::equal(y, want));

  const auto dy = torch::randn(want.sizes());
  y.backward(dy);
  want.backward(dy);
  EXPECT_TRUE(torch::equal(x_parts.grad(), x_joined.grad()));
  EXPECT_TRUE(torch::equal(gate.grad().transpose(1, 2), w.grad().narrow(2, 0, 32)));
  EXPECT_TRUE(torch::equal(up.grad(), w.grad().narrow(2, 32, 48)));
  EXPECT_TRUE(torch::equal(every_other(spaced.grad()), w.grad().narrow(2, 80, 32)));
}

// A row's output does not depend on how the rows around it are grouped: the
// same rows as one group of 60 or as groups of 7 and 53 (so an expert's output
// is the same at every expert-parallel layout).
TEST(GroupedMatmulTest, Fp32RowsAreBitwiseTheSameInAnyGrouping) {
  if (!grouped_matmul_has_cpu_kernel(torch::kFloat)) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(4);
  const auto x = torch::randn({60, 32});
  const auto w = torch::randn({1, 32, 48});
  const auto whole = grouped_matmul(x, w, {60});
  const auto split = grouped_matmul(x, w.expand({2, 32, 48}), {7, 53});
  EXPECT_TRUE(torch::equal(whole, split));
}

// Each output of the fp32 kernel is one FMA chain over the reduction in order,
// also where the reduction takes several passes of the tiles (K = 160 in the
// forward, 300 rows in the weight gradient): the same bits as a scalar
// std::fma loop.
TEST(GroupedMatmulTest, Fp32ReductionsOverSeveralPassesAreOneFmaChainInOrder) {
  if (!grouped_matmul_has_cpu_kernel(torch::kFloat)) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(6);
  const int64_t rows = 300, k = 160, n = 32;
  const auto x = torch::randn({rows, k}).requires_grad_(true);
  const auto w = torch::randn({1, k, n}).requires_grad_(true);
  const auto dy = torch::randn({rows, n});
  const auto y = grouped_matmul(x, w, {rows});
  y.backward(dy);
  // c[i][j] = sum over s of a(i, s) * b(s, j), one fma at a time in order of s.
  const auto fma_chain = [](int64_t m, int64_t cols, int64_t steps, const auto& a, const auto& b) {
    auto c = torch::empty({m, cols});
    auto ca = c.accessor<float, 2>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        float acc = 0;
        for (int64_t s = 0; s < steps; ++s) acc = std::fma(a(i, s), b(s, j), acc);
        ca[i][j] = acc;
      }
    }
    return c;
  };
  const auto x_values = x.detach(), w_values = w.detach()[0];
  const auto xa = x_values.accessor<float, 2>();
  const auto wa = w_values.accessor<float, 2>();
  const auto dya = dy.accessor<float, 2>();
  const auto want_y = fma_chain(
      rows, n, k, [&](int64_t i, int64_t s) { return xa[i][s]; },
      [&](int64_t s, int64_t j) { return wa[s][j]; });
  // The kernel computes dw^T = dy^T x: row i of dw^T is column i of dy.
  const auto want_dw_t = fma_chain(
      n, k, rows, [&](int64_t i, int64_t s) { return dya[s][i]; },
      [&](int64_t s, int64_t j) { return xa[s][j]; });
  EXPECT_TRUE(torch::equal(y.detach(), want_y));
  EXPECT_TRUE(torch::equal(w.grad()[0], want_dw_t.t()));
}

// The grouped GEMMs' blocks go to the threads in runs of about equal work, not
// of equal count: four blocks of work 3 (an expert with three times the rows
// of the next four, in a weight gradient) and four of work 1.
TEST(GroupedMatmulTest, ThreadsTakeRunsOfBlocksOfEqualWorkNotEqualCount) {
  const std::vector<int64_t> work_before = {0, 3, 6, 9, 12, 13, 14, 15, 16};
  EXPECT_EQ(grouped_gemm::balanced_runs(work_before, 2), (std::vector<std::size_t>{0, 3, 8}));
  EXPECT_EQ(grouped_gemm::balanced_runs(work_before, 4), (std::vector<std::size_t>{0, 2, 3, 4, 8}));
  EXPECT_EQ(grouped_gemm::balanced_runs(work_before, 1), (std::vector<std::size_t>{0, 8}));
}

TEST(GroupedMatmulTest, CountsThatDoNotSumToTheRowsAreRefused) {
  const auto x = torch::zeros({4, 16}, torch::kBFloat16);
  const auto w = torch::zeros({2, 16, 16}, torch::kBFloat16);
  EXPECT_THROW(grouped_matmul(x, w, {1, 2}), c10::Error);
  EXPECT_THROW(grouped_matmul(x, w, {5, -1}), c10::Error);
  EXPECT_THROW(grouped_matmul(x, w, {4}), c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KernelsTest,
                         ::testing::Values(torch::kFloat32, torch::kBFloat16, torch::kFloat64),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

// The routing statistics' counts against the composition: assignments dropped
// here and there (one token loses all of its), experts over one to five ranks,
// k from 1 to 6; an id outside [0, E) is refused, not counted out of bounds.
TEST(RouteCounts, MatchesBincountAndTheScatterOfEachTokensRanks) {
  torch::manual_seed(7);
  for (const int64_t ranks : {1, 2, 5}) {
    for (const int64_t k : {1, 2, 6}) {
      const int64_t experts = 10, tokens = 57;
      const auto rank_of = torch::randint(0, ranks, {experts}, torch::kLong);
      rank_of[0] = ranks - 1;  // the highest rank holds one expert at least
      const auto chosen = torch::randint(0, experts, {tokens, k}, torch::kLong);
      auto kept =
          torch::where(torch::rand({tokens, k}) < 0.2, torch::full_like(chosen, -1), chosen);
      kept[3].fill_(-1);
      const auto got = route_counts(chosen, kept, rank_of);
      const auto want = route_counts_reference(chosen, kept, rank_of);
      const std::string what = std::to_string(ranks) + " ranks, top-" + std::to_string(k);
      EXPECT_TRUE(torch::equal(got.chosen_E, want.chosen_E)) << what;
      EXPECT_TRUE(torch::equal(got.kept_E, want.kept_E)) << what;
      EXPECT_EQ(got.dropped.item<int64_t>(), want.dropped.item<int64_t>()) << what;
      EXPECT_EQ(got.ranks_reached.item<int64_t>(), want.ranks_reached.item<int64_t>()) << what;
      EXPECT_GT(got.dropped.item<int64_t>(), 0) << what;
    }
  }
  const auto ids = torch::tensor({0L, 4L}).view({1, 2});
  EXPECT_THROW(route_counts(ids, ids, torch::zeros({4}, torch::kLong)), c10::Error);
  EXPECT_THROW(route_counts(ids, ids.neg(), torch::zeros({5}, torch::kLong)), c10::Error);
}

// The router's scores: the kernel against the composition, outputs and the
// logits' gradient, for each way the losses read them: every output (random
// gradients), the Switch loss's probabilities averaged over the tokens (one
// gradient row broadcast) with the gates, the gates alone, the z-loss's lse
// alone. The chosen experts are not each row's best (a selection bias picks
// them), over rows enough for several parallel tasks, E one expert to 256.
TEST(SoftmaxRoute, MatchesSoftmaxGatherAndLogsumexpWithGradients) {
  torch::manual_seed(7);
  using Losses = std::function<torch::Tensor(const SoftmaxRoute&)>;
  const std::vector<std::pair<std::string, Losses>> losses = {
      {"all",
       [](const SoftmaxRoute& r) {
         return (r.probs_TE * torch::randn_like(r.probs_TE)).sum() +
                (r.gates_TK * torch::randn_like(r.gates_TK)).sum() +
                (r.lse_T * torch::randn_like(r.lse_T)).sum();
       }},
      {"switch",
       [](const SoftmaxRoute& r) {
         return (r.probs_TE.mean(0) * torch::arange(r.probs_TE.size(1), r.probs_TE.options()))
                    .sum() +
                r.gates_TK.square().sum();
       }},
      {"gates", [](const SoftmaxRoute& r) { return r.gates_TK.pow(3).sum(); }},
      {"z", [](const SoftmaxRoute& r) { return r.lse_T.pow(2).mean(); }}};
  const std::vector<std::array<int64_t, 3>> shapes = {
      {700, 64, 8}, {300, 4, 2}, {9, 1, 1}, {33, 7, 3}, {5, 256, 6}};
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [tokens, experts, k] : shapes) {
      const auto logits = 3 * torch::randn({tokens, experts}, dtype);
      const auto chosen = std::get<1>((logits + torch::randn_like(logits)).topk(k, -1));
      for (const bool over_chosen : {true, false}) {
        for (const auto& [name, loss] : losses) {
          const std::string what = std::string(c10::toString(dtype)) + " " +
                                   std::to_string(experts) + " experts top-" + std::to_string(k) +
                                   (over_chosen ? " over chosen, " : " chosen probs, ") + name;
          auto in = logits.clone().requires_grad_(true),
               in_ref = logits.clone().requires_grad_(true);
          const auto got = softmax_route(in, chosen, over_chosen);
          const auto want = softmax_route_reference(in_ref, chosen, over_chosen);
          const auto tol = tolerance(dtype);
          expect_close(got.probs_TE, want.probs_TE, tol, what + " probs");
          expect_close(got.gates_TK, want.gates_TK, tol, what + " gates");
          expect_close(got.lse_T, want.lse_T, tol, what + " lse");
          expect_close(got.entropy_T, want.entropy_T, tol, what + " entropy");
          EXPECT_FALSE(got.entropy_T.requires_grad()) << what;
          torch::manual_seed(11);
          loss(got).backward();
          torch::manual_seed(11);
          loss(want).backward();
          expect_close(in.grad(), in_ref.grad(), tol, what + " gradient");
        }
      }
    }
  }
}

// Against torch::topk on distinct values (ties are where the two may differ):
// the router's shapes, k = cols, a row too long for registers, a strided input,
// -inf entries (group limits), double.
TEST(TopK, SameIndicesAsTorchTopkInTheSameOrder) {
  torch::manual_seed(7);
  const std::vector<std::array<int64_t, 3>> shapes = {{2048, 64, 8}, {2048, 4, 2}, {33, 7, 7},
                                                      {5, 1, 1},     {0, 6, 2},    {50, 300, 5}};
  for (const auto& [rows, cols, k] : shapes) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      auto values = torch::randn({rows, cols}, dtype);
      if (cols > 2) values.select(1, 1).fill_(-std::numeric_limits<double>::infinity());
      const auto want = std::get<1>(values.topk(k, -1));
      EXPECT_TRUE(torch::equal(top_k_indices(values, k), want))
          << rows << "x" << cols << " top-" << k << " " << dtype;
    }
  }
  const auto wide = torch::randn({40, 64});
  const auto strided = wide.narrow(1, 0, 32);
  EXPECT_TRUE(torch::equal(top_k_indices(strided, 8), std::get<1>(strided.topk(8, -1))));
}

TEST(TopK, TiesGoToTheLowerIndexAndNanRanksFirst) {
  const auto nan = std::numeric_limits<float>::quiet_NaN();
  const auto values = torch::tensor({1.f, 3.f, 3.f, 0.f, 3.f, nan, 2.f, 2.f}).view({2, 4});
  // fp32 rows in registers (the second, with its NaN, by insertion), double by insertion.
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto got = top_k_indices(values.to(dtype), 2);
    EXPECT_TRUE(torch::equal(got, torch::tensor({1L, 2L, 1L, 0L}).view({2, 2}))) << got;
  }
  EXPECT_THROW(top_k_indices(values, 5), c10::Error);
  // 16 rows at once (fp32 rows in lanes): a block of tied rows, a block holding
  // the NaN row (by row), then rows past the last block. And k up to the lanes'
  // limit and past it.
  const auto tied = values[0].repeat({16, 1}), mixed = values.repeat({8, 1});
  const auto got = top_k_indices(torch::cat({tied, mixed, values}), 2);
  const auto want = torch::cat({torch::tensor({1L, 2L}).repeat({16, 1}),
                                torch::tensor({1L, 2L, 1L, 0L}).view({2, 2}).repeat({9, 1})});
  EXPECT_TRUE(torch::equal(got, want)) << got;
  const auto even = torch::tensor({5.f, 1.f, 5.f, 1.f, 5.f, 1.f, 5.f, 1.f}).repeat({16, 3});
  const auto fives_then_ones = torch::cat({torch::arange(0, 24, 2), torch::arange(1, 24, 2)});
  for (const int64_t k : {1, 12, 13, 24}) {
    EXPECT_TRUE(
        torch::equal(top_k_indices(even, k), fives_then_ones.narrow(0, 0, k).repeat({16, 1})))
        << "k " << k;
  }
}

}  // namespace
}  // namespace moelab
