// Checkpoints keep one tensor per expert (and per expert's AdamW moments) while
// the model stacks its experts: a per-expert checkpoint loads into the stacks
// and saving them gives back exactly the tensors that were loaded, whichever
// range of a stack a rank holds.
#include "checkpoint/stacked_tensors.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/optimizer_state.h"
#include "common/temp_dir.h"
#include "model/model_test_util.h"
#include "model/transformer.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::HoldsExperts;
using NamedTensors = std::map<std::string, torch::Tensor>;

const char* const kFields[] = {"exp_avg", "exp_avg_sq", "step"};

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

// The model's tensors as a run holds them: its parameters (stacked) and, for
// each, AdamW moments of its shape and a step count, as whole parts.
struct RunTensors {
  NamedTensors tensors;
  TensorParts parts;
};

RunTensors run_tensors(const Transformer& model, bool optimizer_state) {
  RunTensors run;
  for (const auto& p : model->named_parameters()) {
    run.tensors[p.key()] = p.value().detach();
    if (!optimizer_state) continue;
    for (const char* field : kFields) {
      run.tensors[optimizer_state_name(p.key(), field)] = std::string(field) == "step"
                                                              ? torch::zeros({}, torch::kLong)
                                                              : torch::empty_like(p.value());
    }
  }
  for (const auto& [name, t] : run.tensors) run.parts.push_back(whole_part(name, t));
  return run;
}

std::string write_checkpoint(const testing::TempDir& dir, const NamedTensors& saved) {
  prepare_checkpoint_tmp_dir(dir.str(), 1);
  write_tensor_file(checkpoint_tmp_dir(dir.str(), 1) + "/weights.h5", saved);
  finalize_checkpoint(dir.str(), 1, nlohmann::json::object(), 0);
  return checkpoint_dir(dir.str(), 1);
}

// Reads the per-expert parts of `run` as a resume does.
void read_stacked(const std::string& ckpt, const Transformer& model, const TensorParts& parts) {
  const CheckpointReader reader(ckpt, read_checkpoint_meta(ckpt));
  const TensorParts rows = split_stacked_parts(parts, model->stacked_params(), true);
  for (const auto& part : rows) reader.read(part);
  join_stacked_steps(parts, rows, model->stacked_params(), ckpt);
}

// Loads `saved` into the model's stacks, saves them back as a checkpoint does
// (in pieces of `piece` elements, as ranks sharing a stack write it), and checks
// that every tensor comes back bit for bit.
void expect_round_trip(const Transformer& model, const NamedTensors& saved, int64_t piece) {
  testing::TempDir dir;
  const RunTensors run = run_tensors(model, true);
  read_stacked(write_checkpoint(dir, saved), model, run.parts);
  TensorParts pieces;
  for (const auto& [name, t] : run.tensors) {
    for (int64_t b = 0; b < t.numel(); b += piece) {
      pieces.push_back(part_of(name, t, b, std::min(piece, t.numel() - b)));
    }
  }
  NamedTensors written;
  for (const auto& part : split_stacked_parts(pieces, model->stacked_params())) {
    torch::Tensor& whole = written[part.name];
    if (!whole.defined()) whole = torch::zeros(part.shape, part.data.options());
    whole.view(-1).narrow(0, part.begin, part.data.numel()).copy_(part.data);
  }
  int64_t experts = 0;
  for (const auto& [name, t] : written) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;
    experts += is_expert(name);
  }
  for (const auto& w : model->named_weights()) {
    EXPECT_TRUE(torch::equal(w.value(), saved.at(w.key()))) << w.key();
  }
  // 3 matrices x (weight, 2 moments, step) per expert held, 2 layers.
  const auto held =
      static_cast<int64_t>(model->named_weights().size() -
                           (model->named_parameters().size() - model->stacked_params().size()));
  EXPECT_EQ(experts, 4 * held);
}

TEST(StackedTensors, PerExpertCheckpointLoadsIntoTheStacksAndSavesBitwise) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  // One stacked parameter per projection and layer, not one per expert.
  int64_t expert_params = 0;
  for (const auto& p : model->named_parameters()) expert_params += is_expert(p.key());
  EXPECT_EQ(expert_params, 2 /*layers*/ * 3 /*projections*/);
  expect_round_trip(model, per_expert_checkpoint(model), int64_t{1} << 40);
  // Pieces that start and end inside experts' rows.
  expect_round_trip(model, per_expert_checkpoint(model), 7);
}

TEST(StackedTensors, ARankHoldingSomeExpertsTakesAndSavesOnlyThose) {
  const Config cfg = testing::tiny_config(true);
  Transformer full(model_settings(cfg));
  MoeContext odd_rank;
  odd_rank.make_dispatcher = [](int64_t) {
    return std::make_shared<HoldsExperts>(std::vector<int64_t>{1, 3});
  };
  Transformer partial(model_settings(cfg), odd_rank);
  expect_round_trip(partial, per_expert_checkpoint(full), 5);
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
  expect_round_trip(model, per_expert_checkpoint(model), 11);
}

TEST(StackedTensors, AMissingExpertTensorIsNamed) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors saved = per_expert_checkpoint(model);
  saved.erase("layers.1.moe.experts.2.w3");
  testing::TempDir dir;
  const std::string ckpt = write_checkpoint(dir, saved);
  try {
    read_stacked(ckpt, model, run_tensors(model, true).parts);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(ckpt), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layers.1.moe.experts.2.w3"), std::string::npos)
        << e.what();
  }
}

TEST(StackedTensors, ExpertsAtDifferentStepsAreRefused) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors saved = per_expert_checkpoint(model);
  saved["optim/layers.0.moe.experts.3.w2/step"] = torch::tensor(int64_t{4});
  testing::TempDir dir;
  EXPECT_THROW(read_stacked(write_checkpoint(dir, saved), model, run_tensors(model, true).parts),
               InputError);
}

TEST(StackedTensors, WeightsOnlyCheckpointsLoadWithoutOptimizerState) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  NamedTensors weights;
  for (const auto& w : model->named_weights()) weights[w.key()] = torch::randn(w.value().sizes());
  testing::TempDir dir;
  read_stacked(write_checkpoint(dir, weights), model, run_tensors(model, false).parts);
  for (const auto& w : model->named_weights()) {
    EXPECT_TRUE(torch::equal(w.value(), weights.at(w.key()))) << w.key();
  }
}

}  // namespace
}  // namespace moelab
