// Checkpoint folders. Rank-count agnostic: any number of ranks write their own
// .h5 files of named tensors into one temporary folder; rank 0 then seals it with
// meta.json (the checksum of every file) and renames it into place, so a folder
// named step_<n> is complete by construction and a .tmp one is never loaded.
//
//   rank 0: prepare_checkpoint_tmp_dir(run, step)      then a barrier
//   every rank: write_tensor_file(checkpoint_tmp_dir(run, step) + "/<file>.h5", ...)
//   barrier; rank 0: finalize_checkpoint(run, step, meta, keep)
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checkpoint/tensor_file.h"

namespace moelab {

struct LoadedCheckpoint {
  std::string dir;
  int64_t step = 0;
  nlohmann::json meta;  // what finalize_checkpoint was given, plus "step" and "files"
  std::map<std::string, torch::Tensor> tensors;  // merged from all of the folder's .h5 files
};

// "<run_dir>/checkpoints/step_<8 digits>" and the same with ".tmp".
std::string checkpoint_dir(const std::string& run_dir, int64_t step);
std::string checkpoint_tmp_dir(const std::string& run_dir, int64_t step);

// Empties (a crashed run may have left files there) and creates the temporary folder.
void prepare_checkpoint_tmp_dir(const std::string& run_dir, int64_t step);

// Seals the temporary folder: writes meta.json holding `meta`, "step" and the
// xxHash64 and size of every .h5 file, fsyncs, renames it to step_<n> (replacing a
// folder of that name) and removes all but the newest `keep` checkpoints (keep <= 0
// keeps all) together with leftover temporary folders.
void finalize_checkpoint(const std::string& run_dir, int64_t step, const nlohmann::json& meta,
                         int64_t keep);

// Loads one checkpoint folder, verifying every file against meta.json. Missing or
// corrupt files, checksum mismatches and a tensor present in two files are
// InputErrors naming the file.
LoadedCheckpoint load_checkpoint(const std::string& dir);

// The newest checkpoint of the run that loads and verifies; broken ones are skipped
// with a warning naming the folder and the reason. nullopt when there is none.
std::optional<LoadedCheckpoint> load_latest_valid_checkpoint(const std::string& run_dir);

}  // namespace moelab
