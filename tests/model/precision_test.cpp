// train.precision = "auto": its choice and reason for each kind of CPU and for
// CUDA, from CPU features given to it (this machine's are one case of many).
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

TEST(Precision, AutoIsFp32WithoutNativeBf16) {
  const auto choice = resolve_precision(Precision::kAuto, kCpu, cpu(false, false));
  EXPECT_EQ(choice.precision, Precision::kFp32);
  EXPECT_NE(choice.reason.find("no native bf16 matmul"), std::string::npos) << choice.reason;
  EXPECT_FALSE(bf16_is_native(kCpu, cpu(false, false)));
}

TEST(Precision, AutoIsBf16WithAvx512Bf16OrAmxNamingThem) {
  const auto avx = resolve_precision(Precision::kAuto, kCpu, cpu(true, false));
  EXPECT_EQ(avx.precision, Precision::kBf16);
  EXPECT_NE(avx.reason.find("(avx512_bf16)"), std::string::npos) << avx.reason;
  const auto both = resolve_precision(Precision::kAuto, kCpu, cpu(true, true));
  EXPECT_EQ(both.precision, Precision::kBf16);
  EXPECT_NE(both.reason.find("(amx_bf16, avx512_bf16)"), std::string::npos) << both.reason;
  EXPECT_TRUE(bf16_is_native(kCpu, cpu(false, true)));
}

TEST(Precision, AutoIsBf16OnCudaWhateverTheCpu) {
  const torch::Device gpu(torch::kCUDA, 0);
  EXPECT_EQ(resolve_precision(Precision::kAuto, gpu, cpu(false, false)).precision,
            Precision::kBf16);
  EXPECT_TRUE(bf16_is_native(gpu, cpu(false, false)));
}

TEST(Precision, AnExplicitChoiceIsKept) {
  for (const char* p : {"fp32", "bf16"}) {
    const auto choice = resolve_precision(*parse_choice<Precision>(p), kCpu, cpu(false, false));
    EXPECT_EQ(choice_name(choice.precision), p);
    EXPECT_EQ(choice.reason, std::string("train.precision = \"") + p + "\"");
  }
}

}  // namespace
}  // namespace moelab
