#include "checkpoint/checkpoint_io.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "comm/local_communicator.h"
#include "common/captured_log.h"
#include "common/temp_dir.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

// Writes a checkpoint of whole tensors, one file per kind as checkpoints were
// before distributed writing (and as one process writes weights): each file's
// datasets are whole tensors, and the manifest names only the files.
void save(const std::string& run, int64_t step, int64_t keep = 0) {
  prepare_checkpoint_tmp_dir(run, step);
  const std::string tmp = checkpoint_tmp_dir(run, step);
  write_tensor_file(tmp + "/model.h5", {{"w", torch::full({2, 2}, static_cast<float>(step))}});
  write_tensor_file(tmp + "/experts_rank1.h5",
                    {{"layers.0.experts.1.w1", torch::full({3}, static_cast<double>(step))}});
  finalize_checkpoint(run, step, {{"tokens", step * 100}}, keep);
}

std::vector<std::string> folder_names(const std::string& run) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(run) / "checkpoints")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void corrupt_one_byte(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(-8, std::ios::end);
  char byte = 0;
  file.get(byte);
  file.seekp(-8, std::ios::end);
  file.put(static_cast<char>(byte ^ 0x5a));
}

TEST(CheckpointIo, FolderNamesHaveEightDigitSteps) {
  EXPECT_EQ(checkpoint_dir("run", 42), "run/checkpoints/step_00000042");
  EXPECT_EQ(checkpoint_tmp_dir("run", 42), "run/checkpoints/step_00000042.tmp");
}

// The newest checkpoint that verifies, as a world of one finds it.
std::optional<int64_t> newest_step(const std::string& run) {
  LocalCommunicator world;
  const auto found = newest_verified_checkpoint(world, run);
  if (!found) return std::nullopt;
  return found->meta.at("step").get<int64_t>();
}

TEST(CheckpointIo, SavedCheckpointLoadsWithMergedTensorsAndMeta) {
  testing::TempDir run;
  save(run.str(), 5);
  ASSERT_EQ(newest_step(run.str()), 5);
  const auto loaded =
      std::optional<LoadedCheckpoint>(load_checkpoint(checkpoint_dir(run.str(), 5)));
  EXPECT_EQ(loaded->step, 5);
  EXPECT_EQ(loaded->dir, checkpoint_dir(run.str(), 5));
  EXPECT_EQ(loaded->meta["tokens"], 500);
  EXPECT_EQ(loaded->meta["files"].size(), 2u);
  ASSERT_EQ(loaded->tensors.size(), 2u);
  EXPECT_TRUE(torch::equal(loaded->tensors.at("w"), torch::full({2, 2}, 5.0f)));
  EXPECT_TRUE(torch::equal(loaded->tensors.at("layers.0.experts.1.w1"),
                           torch::full({3}, 5.0, torch::kDouble)));
  EXPECT_FALSE(fs::exists(checkpoint_tmp_dir(run.str(), 5)));
}

TEST(CheckpointIo, NoCheckpointGivesNothing) {
  testing::TempDir run;
  EXPECT_FALSE(newest_step(run.str()).has_value());
}

TEST(CheckpointIo, LeftoverTemporaryFolderIsIgnored) {
  testing::TempDir run;
  save(run.str(), 5);
  // A crash after writing but before finalising leaves a newer .tmp folder.
  prepare_checkpoint_tmp_dir(run.str(), 9);
  write_tensor_file(checkpoint_tmp_dir(run.str(), 9) + "/model.h5", {{"w", torch::zeros({2, 2})}});
  EXPECT_EQ(newest_step(run.str()), 5);
}

TEST(CheckpointIo, CorruptNewestFallsBackToThePreviousWithAWarning) {
  testing::TempDir run;
  save(run.str(), 5);
  save(run.str(), 10);
  const std::string corrupt_file = checkpoint_dir(run.str(), 10) + "/model.h5";
  corrupt_one_byte(corrupt_file);
  testing::CapturedLog log;
  EXPECT_EQ(newest_step(run.str()), 5);
  EXPECT_NE(log.text().find(checkpoint_dir(run.str(), 10)), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("checksum"), std::string::npos) << log.text();
}

TEST(CheckpointIo, IncompleteCheckpointIsSkipped) {
  testing::TempDir run;
  save(run.str(), 5);
  save(run.str(), 10);
  fs::remove(checkpoint_dir(run.str(), 10) + "/experts_rank1.h5");
  testing::CapturedLog log;
  EXPECT_EQ(newest_step(run.str()), 5);
  EXPECT_NE(log.text().find("missing"), std::string::npos) << log.text();
}

TEST(CheckpointIo, ExplicitCorruptCheckpointIsAnInputErrorNamingTheFile) {
  testing::TempDir run;
  save(run.str(), 5);
  const std::string file = checkpoint_dir(run.str(), 5) + "/experts_rank1.h5";
  fs::resize_file(file, fs::file_size(file) - 16);
  try {
    load_checkpoint(checkpoint_dir(run.str(), 5));
    FAIL() << "truncated checkpoint accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_checkpoint(run / "no_such_checkpoint"), InputError);
}

TEST(CheckpointIo, KeepsTheNewestK) {
  testing::TempDir run;
  prepare_checkpoint_tmp_dir(run.str(), 3);  // stale: older than what follows
  for (int64_t step : {10, 20, 30, 40}) save(run.str(), step, /*keep=*/2);
  EXPECT_EQ(folder_names(run.str()), (std::vector<std::string>{"step_00000030", "step_00000040"}));
}

TEST(CheckpointIo, StaleFilesInTheTemporaryFolderAreCleared) {
  testing::TempDir run;
  prepare_checkpoint_tmp_dir(run.str(), 5);
  write_tensor_file(checkpoint_tmp_dir(run.str(), 5) + "/rank_3.h5", {{"old", torch::zeros({1})}});
  save(run.str(), 5);
  EXPECT_EQ(load_checkpoint(checkpoint_dir(run.str(), 5)).tensors.count("old"), 0u);
}

}  // namespace
}  // namespace moelab
