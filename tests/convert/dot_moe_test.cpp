// DOT-MoE calibration on a dense model trained for a moment on a counting
// stream: the learned assignment is balanced, the experts it makes add up to
// the FFN, and calibrating (scores and router, everything else frozen) lowers
// the language-model loss of the quarter-active MoE it starts from.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "common/checkpoint_test_util.h"
#include "common/temp_dir.h"
#include "config/load.h"
#include "convert/convert.h"
#include "convert/dot_moe.h"
#include "data/batch_loader.h"
#include "data/data_test_util.h"
#include "model/model_test_util.h"
#include "model/transformer.h"

namespace moelab {
namespace {

class DotMoe : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg = moelab::testing::tiny_config(false);  // vocab 37, d_ff 24, seq 8
    cfg.data.dir = dir / "data";
    cfg.train.batch_seqs = 8;
    moelab::testing::write_counting_split(cfg.data.dir, "train", 4000, 40, 1000, 37);
    // A few hundred Adam steps: the dense model learns to count.
    Transformer model(model_settings(cfg));
    torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
    BatchLoader loader(cfg.data.dir, "train", cfg.model.seq_len, 8, 0, 1, 0, 0);
    for (int step = 0; step < 100; ++step) {
      const auto batch = loader.next();
      adam.zero_grad();
      model->forward(batch.slice(1, 0, -1), batch.slice(1, 1)).lm_loss.backward();
      adam.step();
    }
    moelab::testing::save_model_checkpoint(dir.str(), 1, model, cfg);
  }

  DotOptions options() const {
    DotOptions o;
    o.experts = 4;
    o.top_k = 1;  // a quarter of the units: far from the dense model
    o.steps = 60;
    o.cluster_iterations = 10;
    return o;
  }

  moelab::testing::TempDir dir;
  Config cfg;
};

TEST_F(DotMoe, CalibrationLowersTheLossWithABalancedAssignment) {
  const DenseCheckpoint dense = load_dense_checkpoint(checkpoint_dir(dir.str(), 1));
  const DotResult r = dot_calibrate(dense, options());
  EXPECT_LT(r.last_loss, r.first_loss);
  ASSERT_EQ(r.layers.size(), 2u);
  const auto x = torch::randn({5, cfg.model.d_model});
  for (size_t l = 0; l < r.layers.size(); ++l) {
    std::vector<int64_t> count(4, 0);
    for (int64_t e : r.layers[l].expert_of_unit) ++count[size_t(e)];
    EXPECT_EQ(count, (std::vector<int64_t>{6, 6, 6, 6})) << "layer " << l;
    EXPECT_EQ(r.layers[l].router.sizes(), (std::vector<int64_t>{4, cfg.model.d_model}));
    // Unit gates on every expert: the dense FFN.
    const FfnWeights ffn = dense_ffn(dense, int64_t(l));
    const auto f = [](const FfnWeights& w, const torch::Tensor& in) {
      return torch::matmul(torch::silu(in.matmul(w.w1.t())) * in.matmul(w.w3.t()), w.w2.t());
    };
    auto sum = torch::zeros({5, cfg.model.d_model});
    for (const auto& e : split_by_assignment(ffn, r.layers[l].expert_of_unit, 4)) sum += f(e, x);
    EXPECT_TRUE(torch::allclose(sum, f(ffn, x), 1e-5, 1e-5)) << "layer " << l;
  }
}

TEST_F(DotMoe, ConvertWritesTheLearnedRouters) {
  ConvertRequest request{
      checkpoint_dir(dir.str(), 1), dir / "dot", "dot", 4, 1, 10, 0, -1, options()};
  request.dot.steps = 5;
  const LoadedCheckpoint written = load_checkpoint(convert_checkpoint(request));
  EXPECT_EQ(written.meta.at("method"), "dot");
  EXPECT_EQ(written.meta.at("dot").at("calibration_steps"), 5);
  // Not the random draw the other methods make: that would be keyed by the seed.
  ConvertRequest cluster = request;
  cluster.method = "cluster";
  cluster.out = dir / "cluster";
  const LoadedCheckpoint plain = load_checkpoint(convert_checkpoint(cluster));
  const std::string router = "layers.0.moe.router.weight";
  EXPECT_FALSE(torch::equal(written.tensors.at(router), plain.tensors.at(router)));
}

}  // namespace
}  // namespace moelab
