// The checks that make conversions trustworthy: from a dense checkpoint,
// upcycling with identical experts under topk_softmax, and a random or
// cluster split with every expert active and equal gates, give an MoE whose
// logits are the dense model's; a split with fewer active experts does not.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "checkpoint/checkpoint_io.h"
#include "common/checkpoint_test_util.h"
#include "common/temp_dir.h"
#include "config/load.h"
#include "convert/convert.h"
#include "model/model_test_util.h"
#include "model/transformer.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::TempDir;

class FunctionPreservation : public ::testing::Test {
 protected:
  void SetUp() override {
    const Config cfg = testing::tiny_config(false);  // d_ff 24
    Transformer dense(model_settings(cfg));
    testing::save_model_checkpoint(dir.str(), 3, dense, cfg);
    tokens = torch::randint(0, cfg.model.vocab_size, {3, cfg.model.seq_len});
    torch::NoGradGuard no_grad;
    dense->eval();
    dense_logits = dense->forward(tokens).logits;
  }

  double max_difference(const std::string& weights) {
    torch::NoGradGuard no_grad;
    return (testing::load_model_checkpoint(weights)->forward(tokens).logits - dense_logits)
        .abs()
        .max()
        .item<double>();
  }

  std::string dense_checkpoint() const { return checkpoint_dir(dir.str(), 3); }

  TempDir dir;
  torch::Tensor tokens, dense_logits;
};

TEST_F(FunctionPreservation, UpcycledCopiesComputeTheDenseModel) {
  UpcycleRequest r{dense_checkpoint(), dir / "up", {4, 1, 0.0, 0}, 2, 0.5};
  EXPECT_LE(max_difference(upcycle_checkpoint(r)), 1e-5);
}

TEST_F(FunctionPreservation, SplitsWithEveryExpertActiveComputeTheDenseModel) {
  for (const char* method : {"random", "cluster"}) {
    SCOPED_TRACE(method);
    ConvertRequest r{dense_checkpoint(), dir / method, method, 4, 4, 10, 1, 0.0, {}};
    EXPECT_LE(max_difference(convert_checkpoint(r)), 1e-5);
  }
}

TEST_F(FunctionPreservation, HalfTheExpertsActiveIsADifferentModel) {
  ConvertRequest r{dense_checkpoint(), dir / "half", "cluster", 4, 2, 10, 1, 0.5, {}};
  EXPECT_GT(max_difference(convert_checkpoint(r)), 1e-3);
}

TEST_F(FunctionPreservation, TheNewConfigStartsFromTheWeights) {
  UpcycleRequest r{dense_checkpoint(), dir / "up", {4, 2, 0.0, 0}, 2, -1};
  const std::string weights = upcycle_checkpoint(r);
  const Config cfg = load_config(dir / "up/config.toml");
  EXPECT_EQ(cfg.train.init_from, weights);
  EXPECT_EQ(cfg.train.out_dir, dir / "up/run");
  EXPECT_TRUE(cfg.moe.enabled);
  EXPECT_EQ(cfg.moe.d_expert, 12);  // d_ff 24 in two slices
  EXPECT_EQ(load_checkpoint(weights).meta.at("method"), "upcycle");
}

TEST_F(FunctionPreservation, AnMoeCheckpointIsRefused) {
  UpcycleRequest r{dense_checkpoint(), dir / "up", {4, 1, 0.0, 0}, 2, -1};
  const std::string moe_weights = upcycle_checkpoint(r);
  r.dense_checkpoint = moe_weights;
  r.out = dir / "again";
  try {
    upcycle_checkpoint(r);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is of an MoE model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moelab
