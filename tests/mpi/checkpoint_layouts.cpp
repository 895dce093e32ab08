// ranks: 1 2 3 4
// Distributed checkpoints over real ranks (checkpoint/run_checkpoint.h): every
// rank writes its range of each tensor, at once or in the background; any other
// split of the ranges reads the values back bitwise, from whichever ranks'
// files hold them; ZeRO-1 state saved sharded resumes unsharded and the other
// way round, continuing the uninterrupted AdamW; a checkpoint of whole tensors
// (the format before distributed writing) loads at any sharding; a rank whose
// write fails ends the checkpoint on every rank and leaves the previous one.
#include <filesystem>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/optimizer_state.h"
#include "checkpoint/run_checkpoint.h"
#include "comm/process_groups.h"
#include "common/optimizer_test_util.h"
#include "config/load.h"
#include "mpi_gtest_main.h"
#include "parallel/param_group.h"
#include "parallel/shard_range.h"
#include "train/optimizer.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using NamedTensors = std::map<std::string, torch::Tensor>;

std::shared_ptr<Communicator> world() {
  static auto comm = make_process_groups(1, 1, Backend::kMpi, false).world;
  return comm;
}

// A folder every rank sees, named by rank 0; removed by rank 0 at the end.
class SharedDir {
 public:
  SharedDir() {
    auto id = torch::tensor({int64_t(getpid())}, torch::kLong);
    world()->broadcast(id, 0);
    path_ =
        fs::temp_directory_path() / ("moelab_ckpt_layouts_" + std::to_string(id.item<int64_t>()));
    if (world()->rank() == 0) fs::create_directories(path_);
    world()->barrier();
  }
  ~SharedDir() {
    world()->barrier();
    if (world()->rank() == 0) fs::remove_all(path_);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

Config run_config(const std::string& dir, bool async) {
  Config cfg;
  cfg.train.out_dir = dir;
  cfg.checkpoint.async = async;
  cfg.checkpoint.keep = 100;  // every checkpoint the tests write
  cfg.checkpoint.resume = "auto";
  return cfg;
}

// The same on every rank: sizes that leave some ranks short or empty ranges.
NamedTensors sample() {
  torch::manual_seed(5);
  return {{"a", torch::randn({5, 3})},
          {"b", torch::randn({7}, torch::kDouble)},
          {"c", torch::arange(2, torch::kLong)},
          {"d", torch::randn({4, 4}).to(torch::kBFloat16)}};
}

// Rank `rank` of `ranks`'s range of each tensor, views of `tensors`.
TensorParts ranges(const NamedTensors& tensors, int64_t ranks, int64_t rank) {
  TensorParts parts;
  for (const auto& [name, t] : tensors) {
    const ShardRange r = shard_range(t.numel(), ranks, rank);
    parts.push_back(part_of(name, t, r.begin, r.length));
  }
  return parts;
}

NamedTensors empty_like(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out[name] = torch::zeros_like(t);
  return out;
}

void save_step(RunCheckpointer& checkpointer, const TensorParts& parts, int64_t step) {
  TrainState state;
  state.step = step;
  checkpointer.save(parts, state);
  checkpointer.wait();
}

class EveryRankWrites : public ::testing::TestWithParam<bool> {};

TEST_P(EveryRankWrites, AnySplitOfTheRangesReadsItBack) {
  const SharedDir dir;
  const int rank = world()->rank(), ranks = world()->size();
  const NamedTensors saved = sample();
  RunCheckpointer writer(run_config(dir.str(), GetParam()), world(), {});
  save_step(writer, ranges(saved, ranks, rank), 3);
  const nlohmann::json meta = read_checkpoint_meta(checkpoint_dir(dir.str(), 3));
  EXPECT_EQ(meta.at("files").size(), size_t(ranks));  // every rank wrote its own file
  EXPECT_EQ(meta.at("tensors").at("b").at("parts").size(), size_t(std::min(ranks, 7)));
  // Whole on every rank, the ranges of twice as many ranks, and another rank's range.
  for (const auto& [split, piece] : std::vector<std::pair<int, int>>{
           {1, 0}, {2 * ranks, 2 * rank + 1}, {ranks, ranks - 1 - rank}}) {
    SCOPED_TRACE("range " + std::to_string(piece) + " of " + std::to_string(split));
    NamedTensors back = empty_like(saved);
    RunCheckpointer reader(run_config(dir.str(), false), world(), {});
    const auto state = reader.restore(ranges(back, split, piece));
    ASSERT_TRUE(state.has_value());
    EXPECT_EQ(state->step, 3);
    for (const auto& [name, t] : saved) {
      const ShardRange r = shard_range(t.numel(), split, piece);
      EXPECT_TRUE(torch::equal(back.at(name).view(-1).narrow(0, r.begin, r.length),
                               t.view(-1).narrow(0, r.begin, r.length)))
          << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, EveryRankWrites, ::testing::Values(false, true));

TEST(DistributedCheckpoint, WholeTensorCheckpointsLoadAtAnySharding) {
  const SharedDir dir;
  const NamedTensors saved = sample();
  const Config cfg = run_config(dir.str(), false);
  if (world()->rank() == 0) {
    prepare_checkpoint_tmp_dir(dir.str(), 2);
    write_tensor_file(checkpoint_tmp_dir(dir.str(), 2) + "/replicated.h5", saved);
    finalize_checkpoint(dir.str(), 2,
                        {{"config", to_toml(cfg)},
                         {"tokens", 0},
                         {"best_val_loss", nullptr},
                         {"nonfinite_total", 0},
                         {"nonfinite_in_a_row", 0}},
                        0);
  }
  world()->barrier();
  NamedTensors back = empty_like(saved);
  RunCheckpointer reader(cfg, world(), {});
  ASSERT_EQ(reader.restore(ranges(back, world()->size(), world()->rank()))->step, 2);
  for (const auto& [name, t] : saved) {
    const ShardRange r = shard_range(t.numel(), world()->size(), world()->rank());
    EXPECT_TRUE(torch::equal(back.at(name).view(-1).narrow(0, r.begin, r.length),
                             t.view(-1).narrow(0, r.begin, r.length)))
        << name;
  }
}

TEST(DistributedCheckpoint, AFailedWriteOnOneRankEndsItEverywhereAndKeepsThePrevious) {
  const SharedDir dir;
  const int rank = world()->rank(), ranks = world()->size();
  const NamedTensors saved = sample();
  RunCheckpointer checkpointer(run_config(dir.str(), true), world(), {});
  save_step(checkpointer, ranges(saved, ranks, rank), 3);
  TensorParts parts = ranges(saved, ranks, rank);
  // A name HDF5 cannot hold: the last rank's file cannot be made.
  if (rank == ranks - 1) parts.push_back(whole_part("bad//name", saved.at("a")));
  try {
    save_step(checkpointer, parts, 6);
    FAIL() << "the failed write went unnoticed";
  } catch (const SystemError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("checkpoint at step 6 failed"), std::string::npos) << text;
    if (rank != ranks - 1) {
      EXPECT_NE(text.find("rank " + std::to_string(ranks - 1) + " reported"), std::string::npos)
          << text;
    }
  }
  EXPECT_EQ(checkpoint_folders(dir.str()), std::vector<std::string>{checkpoint_dir(dir.str(), 3)});
  EXPECT_FALSE(fs::exists(checkpoint_tmp_dir(dir.str(), 6)));
}

// Parameters whose sizes leave some ranks short or empty slices.
NamedParams make_params() {
  torch::manual_seed(3);
  return {{"w", torch::randn({5, 3}).requires_grad_()},
          {"norm", torch::randn({2}).requires_grad_()},
          {"experts.w", torch::randn({2, 3, 2}).requires_grad_()}};
}

void set_gradients(const NamedParams& params, int step) {
  for (const auto& [name, p] : params) p.mutable_grad() = torch::sin(p.detach() * (step + 1) + 0.5);
}

std::unique_ptr<torch::optim::AdamW> adamw_of(const ParamGroup& group) {
  std::vector<torch::Tensor> decayed, not_decayed;
  const OptimizerShards& shards = group.shards();
  for (size_t i = 0; i < shards.slices().size(); ++i) {
    (shards.is_matrix()[i] ? decayed : not_decayed).push_back(shards.slices()[i].second);
  }
  return make_adamw(std::move(decayed), std::move(not_decayed), testing::optimizer_test_config());
}

// Steps a group with the gradients every rank agrees on (as after their average).
void step_group(const ParamGroup& group, torch::optim::AdamW& optimizer, int step) {
  set_gradients(group.params(), step);
  group.before_step();
  optimizer.step();
  group.after_step();
}

// Two steps at one sharding, checkpointed, two more at the other: the same
// parameters as four unsharded steps.
void expect_resume_continues(bool saved_sharded, bool resumed_sharded) {
  const SharedDir dir;
  const NamedParams reference = make_params();
  auto adamw = make_adamw(reference, testing::optimizer_test_config());
  for (int step = 0; step < 4; ++step) {
    set_gradients(reference, step);
    adamw->step();
  }
  ParamGroupOptions options;
  options.shard_optimizer = saved_sharded;
  const ParamGroup before(testing::clone_params(make_params()), world(), options);
  auto first = adamw_of(before);
  for (int step = 0; step < 2; ++step) step_group(before, *first, step);
  RunCheckpointer checkpointer(run_config(dir.str(), true), world(), {});
  save_step(checkpointer, before.parts_to_save(*first), 2);

  options.shard_optimizer = resumed_sharded;
  const ParamGroup after(testing::clone_params(make_params()), world(), options);
  auto second = adamw_of(after);
  TensorMap state;
  ASSERT_TRUE(checkpointer.restore(after.parts_to_load(state)).has_value());
  after.load_state(*second, state);
  for (int step = 2; step < 4; ++step) step_group(after, *second, step);
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TRUE(torch::allclose(after.params()[i].second, reference[i].second, 1e-6, 1e-7))
        << reference[i].first;
  }
}

TEST(DistributedCheckpoint, ShardedOptimizerStateResumesUnsharded) {
  expect_resume_continues(true, false);
}

TEST(DistributedCheckpoint, UnshardedOptimizerStateResumesSharded) {
  expect_resume_continues(false, true);
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
