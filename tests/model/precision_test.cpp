// train.precision = "auto": its choice and reason for each kind of CPU and for
// CUDA, from CPU features and matmul rates given to it (this machine's are one
// case of many).
#include "model/precision.h"

#include <gtest/gtest.h>

namespace moelab {
namespace {

CpuFeatures cpu(bool avx512_bf16, bool amx_bf16) {
  CpuFeatures f;
  f.avx512_bf16 = avx512_bf16;
  f.amx_bf16 = amx_bf16;
  return f;
}

const torch::Device kCpu(torch::kCPU);

// Rates for the cases below: bf16 matmul at twice, 1.2 times and half fp32's.
MatmulRates twice() {
  return {200e9, 100e9, 1};
}
MatmulRates slightly_faster() {
  return {120e9, 100e9};
}
MatmulRates half() {
  return {172e9, 330e9, 2};
}
// Where nothing should be measured.
MatmulRates unmeasured() {
  ADD_FAILURE() << "matmul rates measured where the choice needs none";
  return {};
}

TEST(Precision, AutoIsFp32WithoutNativeBf16AndMeasuresNothing) {
  const auto choice = resolve_precision(Precision::kAuto, kCpu, cpu(false, false), unmeasured);
  EXPECT_EQ(choice.precision, Precision::kFp32);
  EXPECT_NE(choice.reason.find("no native bf16 matmul"), std::string::npos) << choice.reason;
}

TEST(Precision, AutoIsBf16WhereNativeBf16MatmulMeasuresClearlyFaster) {
  const auto avx = resolve_precision(Precision::kAuto, kCpu, cpu(true, false), twice);
  EXPECT_EQ(avx.precision, Precision::kBf16);
  EXPECT_NE(
      avx.reason.find("(avx512_bf16) bf16 matmul measured 2.00x the fp32 rate (200 against 100 "
                      "GFLOP/s on 1 thread)"),
      std::string::npos)
      << avx.reason;
  const auto both = resolve_precision(Precision::kAuto, kCpu, cpu(true, true), twice);
  EXPECT_EQ(both.precision, Precision::kBf16);
  EXPECT_NE(both.reason.find("(amx_bf16, avx512_bf16)"), std::string::npos) << both.reason;
}

// Native is not enough: a CPU whose bf16 dot products run at half its fp32
// FMAs' rate, or barely faster, trains in fp32.
TEST(Precision, AutoIsFp32WhereNativeBf16MatmulIsNotClearlyFaster) {
  for (const auto rates : {half, slightly_faster}) {
    const auto choice = resolve_precision(Precision::kAuto, kCpu, cpu(true, false), rates);
    EXPECT_EQ(choice.precision, Precision::kFp32) << choice.reason;
    EXPECT_NE(choice.reason.find("short of the 1.25x"), std::string::npos) << choice.reason;
  }
  const auto half_rate = resolve_precision(Precision::kAuto, kCpu, cpu(true, true), half);
  EXPECT_NE(half_rate.reason.find("measured 0.52x the fp32 rate (172 against 330 GFLOP/s on 2 "
                                  "threads)"),
            std::string::npos)
      << half_rate.reason;
}

TEST(Precision, AutoIsBf16OnCudaWhateverTheCpuAndMeasuresNothing) {
  const torch::Device gpu(torch::kCUDA, 0);
  for (const bool native : {false, true}) {
    EXPECT_EQ(resolve_precision(Precision::kAuto, gpu, cpu(native, native), unmeasured).precision,
              Precision::kBf16);
  }
}

// This process's rates: measured once (the same values on a second call), both
// real rates.
TEST(Precision, CpuMatmulRatesAreMeasuredOnce) {
  const MatmulRates first = cpu_matmul_rates();
  EXPECT_GT(first.bf16, 1e8);
  EXPECT_GT(first.fp32, 1e8);
  EXPECT_EQ(first.threads, torch::get_num_threads());
  const MatmulRates again = cpu_matmul_rates();
  EXPECT_EQ(again.bf16, first.bf16);
  EXPECT_EQ(again.fp32, first.fp32);
}

TEST(Precision, AnExplicitChoiceIsKept) {
  for (const char* p : {"fp32", "bf16"}) {
    const auto choice =
        resolve_precision(*parse_choice<Precision>(p), kCpu, cpu(true, true), unmeasured);
    EXPECT_EQ(choice_name(choice.precision), p);
    EXPECT_EQ(choice.reason, std::string("train.precision = \"") + p + "\"");
  }
}

}  // namespace
}  // namespace moelab
