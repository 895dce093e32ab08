// Checkpoints keep one tensor per expert (and per expert's AdamW moments) while
// the model stacks its experts: a per-expert checkpoint loads into the stacks
// and saving them gives back exactly the tensors that were loaded.
#include "checkpoint/stacked_tensors.h"

#include <gtest/gtest.h>

#include "checkpoint/optimizer_state.h"
#include "model/model_test_util.h"
#include "model/transformer.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::HoldsExperts;

NamedParams params_of(const Transformer& model) {
  NamedParams out;
  for (const auto& p : model->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

bool is_expert(const std::string& name) {
  return name.find(".moe.experts.") != std::string::npos;
}

// What a model with one tensor per expert saved: every weight and its AdamW
// state (random moments, step 5) under the per-expert names of `full`.
NamedTensors per_expert_checkpoint(const Transformer& full) {
  torch::manual_seed(11);
  NamedTensors saved;
  for (const auto& w : full->named_weights()) {
    saved[w.key()] = torch::randn(w.value().sizes());
    saved["optim/" + w.key() + "/exp_avg"] = torch::randn(w.value().sizes());
    saved["optim/" + w.key() + "/exp_avg_sq"] = torch::rand(w.value().sizes());
    saved["optim/" + w.key() + "/step"] = torch::tensor(int64_t{5});
  }
  return saved;
}

// Loads `saved` into model and optimizer as a resume does, saves them back as
// a checkpoint does, and checks that every tensor comes back bit for bit.
void expect_round_trip(Transformer& model, const NamedTensors& saved) {
  const NamedParams params = params_of(model);
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, p] : params) tensors.push_back(p);
  auto optimizer = std::make_unique<torch::optim::AdamW>(tensors);
  const NamedTensors joined = join_stacked(saved, model->stacked_params(), "ckpt");
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, p] : params) p.copy_(joined.at(name));
  }
  load_optimizer_state(*optimizer, params, joined);

  NamedTensors state;
  for (const auto& [name, p] : params) state[name] = p.detach();
  for (auto& [key, t] : optimizer_state_tensors(*optimizer, params)) state[key] = t;
  const NamedTensors written = split_stacked(state, model->stacked_params());
  int64_t experts = 0;
  for (const auto& [name, t] : written) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(t.scalar_type(), saved.at(name).scalar_type()) << name;
    EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;
    experts += is_expert(name);
  }
  for (const auto& w : model->named_weights()) {
    EXPECT_TRUE(torch::equal(w.value(), saved.at(w.key()))) << w.key();
  }
  // 3 matrices x (weight, 2 moments, step) per expert held, 2 layers.
  const auto held = static_cast<int64_t>(model->named_weights().size() -
                                         (params.size() - model->stacked_params().size()));
  EXPECT_EQ(experts, 4 * held);
}

TEST(StackedTensors, PerExpertCheckpointLoadsIntoTheStacksAndSavesBitwise) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  // One stacked parameter per projection and layer, not one per expert.
  int64_t expert_params = 0;
  for (const auto& p : model->named_parameters()) expert_params += is_expert(p.key());
  EXPECT_EQ(expert_params, 2 /*layers*/ * 3 /*projections*/);
  expect_round_trip(model, per_expert_checkpoint(model));
}

TEST(StackedTensors, ARankHoldingSomeExpertsTakesAndSavesOnlyThose) {
  const Config cfg = testing::tiny_config(true);
  Transformer full(model_settings(cfg));
  MoeContext odd_rank;
  odd_rank.make_dispatcher = [](int64_t) {
    return std::make_shared<HoldsExperts>(std::vector<int64_t>{1, 3});
  };
  Transformer partial(model_settings(cfg), odd_rank);
  expect_round_trip(partial, per_expert_checkpoint(full));
  for (const auto& w : partial->named_weights()) {
    if (is_expert(w.key())) {
      EXPECT_TRUE(w.key().find("experts.1.") != std::string::npos ||
                  w.key().find("experts.3.") != std::string::npos)
          << w.key();
    }
  }
}

TEST(StackedTensors, HeterogeneousWidthsRoundTripThroughOneStackPerWidth) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.expert_widths = {8, 16, 8, 16};
  Transformer model(model_settings(cfg));
  int64_t expert_params = 0;
  for (const auto& p : model->named_parameters()) expert_params += is_expert(p.key());
  EXPECT_EQ(expert_params, 2 /*layers*/ * 2 /*widths*/ * 3 /*projections*/);
  expect_round_trip(model, per_expert_checkpoint(model));
}

TEST(StackedTensors, JoinNamesTheMissingExpertTensor) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors saved = per_expert_checkpoint(model);
  saved.erase("layers.1.moe.experts.2.w3");
  try {
    join_stacked(saved, model->stacked_params(), "ckpt_dir");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt_dir"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layers.1.moe.experts.2.w3"), std::string::npos)
        << e.what();
  }
}

TEST(StackedTensors, JoinRefusesExpertsAtDifferentSteps) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors saved = per_expert_checkpoint(model);
  saved["optim/layers.0.moe.experts.3.w2/step"] = torch::tensor(int64_t{4});
  EXPECT_THROW(join_stacked(saved, model->stacked_params(), "ckpt"), InputError);
}

TEST(StackedTensors, WeightsOnlyCheckpointsJoinWithoutOptimizerState) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors weights;
  for (const auto& w : model->named_weights()) weights[w.key()] = w.value().detach().clone();
  const NamedTensors joined = join_stacked(weights, model->stacked_params(), "ckpt");
  for (const auto& p : model->named_parameters()) {
    EXPECT_TRUE(torch::equal(joined.at(p.key()), p.value())) << p.key();
  }
  EXPECT_EQ(joined.size(), model->named_parameters().size());
}

}  // namespace
}  // namespace moelab
