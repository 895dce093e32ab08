// Multi-token prediction (model/mtp.h) at the model's edges; its losses and
// gradients are checked against the float64 reference in reference_test.cpp.
#include <gtest/gtest.h>

#include "model/transformer.h"
#include "model_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

// The modules change neither the model's weights (each drawn from its own
// name) nor what it predicts: without targets no module runs, so the logits
// (what validation and evaluation read) are the plain model's.
TEST(Mtp, LogitsAreThePlainModelsWithTheSameSeed) {
  Config cfg = testing::tiny_config(true);
  Transformer plain(model_settings(cfg));
  cfg.train.mtp_depth = 2;
  Transformer with_mtp(model_settings(cfg));
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, cfg.model.seq_len});
  torch::NoGradGuard no_grad;
  const auto out = with_mtp->forward(tokens);
  EXPECT_TRUE(torch::equal(out.logits, plain->forward(tokens).logits));
  EXPECT_TRUE(out.mtp_ce.empty());
  EXPECT_EQ(out.mtp_loss.item<double>(), 0.0);
}

// Depth k needs a position with a target: k + 1 tokens at least.
TEST(Mtp, SequencesTooShortForTheDepthAreRefusedNamingIt) {
  Config cfg = testing::tiny_config(false);
  cfg.train.mtp_depth = 3;
  Transformer model(model_settings(cfg));
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {1, 3});
  try {
    model->forward(tokens, tokens);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.mtp_depth = 3 needs sequences of more than 3"),
              std::string::npos)
        << e.what();
  }
  const auto longer = torch::randint(0, cfg.model.vocab_size, {1, 4});
  EXPECT_EQ(model->forward(longer, longer).mtp_ce.size(), 3u);
}

// Under bf16 matmuls the modules' projection and block run in bf16 and hand
// fp32 hidden states on; every module parameter gets a finite fp32 gradient.
TEST(Mtp, TrainsUnderBf16Matmuls) {
  Config cfg = testing::tiny_config(true);
  cfg.train.precision = Precision::kBf16;
  cfg.train.mtp_depth = 2;
  Transformer model(model_settings(cfg));
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, cfg.model.seq_len});
  const auto out = model->forward(tokens, tokens);
  ASSERT_EQ(out.mtp_ce.size(), 2u);
  EXPECT_EQ(out.mtp_loss.scalar_type(), torch::kFloat);
  (out.lm_loss + out.mtp_loss).backward();
  int checked = 0;
  for (const auto& p : model->named_parameters()) {
    if (p.key().rfind("mtp.", 0) != 0) continue;
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat) << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace moelab
