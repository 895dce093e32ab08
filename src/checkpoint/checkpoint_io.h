// Checkpoint folders. Rank-count agnostic: any number of ranks write their own
// .h5 files of named tensors into one temporary folder; rank 0 then seals it with
// meta.json, the manifest (the checksum of every file and, for distributed
// checkpoints, where every part of every tensor lies) and renames it into
// place, so a folder named step_<n> is complete by construction and a .tmp one
// is never loaded.
//
//   rank 0: prepare_checkpoint_tmp_dir(run, step)      then a barrier
//   every rank: its files in checkpoint_tmp_dir(run, step) (run_checkpoint.h)
//   rank 0: seal_checkpoint(run, step, manifest, keep)
//
// Checkpoints of one file per tensor kind (before distributed writing, and
// weights written by one process) name files only: every dataset is a whole
// tensor. Both kinds load through CheckpointReader.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/tensor_file.h"
#include "checkpoint/tensor_parts.h"
#include "comm/communicator.h"

namespace moelab {

struct LoadedCheckpoint {
  std::string dir;
  int64_t step = 0;
  nlohmann::json meta;  // the manifest: what sealing was given, plus "step" and "files"
  std::map<std::string, at::Tensor> tensors;  // every tensor, whole
};

// "<run_dir>/checkpoints/step_<8 digits>" and the same with ".tmp".
std::string checkpoint_dir(const std::string& run_dir, int64_t step);
std::string checkpoint_tmp_dir(const std::string& run_dir, int64_t step);

// Empties (a crashed run may have left files there) and creates the temporary folder.
void prepare_checkpoint_tmp_dir(const std::string& run_dir, int64_t step);

// {"xxh64": hex, "bytes": n} of a written file, as the manifest lists it.
nlohmann::json describe_file(const std::string& path);

// Seals the temporary folder: writes `manifest` (which must name every file
// under "files", as describe_file gives them) with "step" as meta.json, fsyncs
// it, renames the folder to step_<n> (replacing one of that name) and removes
// all but the newest `keep` checkpoints (keep <= 0 keeps all) together with
// leftover temporary folders.
void seal_checkpoint(const std::string& run_dir, int64_t step, nlohmann::json manifest,
                     int64_t keep);

// For one process that wrote every file: describes (and fsyncs) every .h5 file
// of the temporary folder into `meta` and seals it.
void finalize_checkpoint(const std::string& run_dir, int64_t step, const nlohmann::json& meta,
                         int64_t keep);

// The manifest of a checkpoint folder; InputError when missing or malformed.
nlohmann::json read_checkpoint_meta(const std::string& dir);

// Checks the manifest's files (the i-th for i % stride == offset, so ranks can
// share the work): present, of their size and checksum. InputError naming the
// file otherwise.
void verify_checkpoint_files(const std::string& dir, const nlohmann::json& meta, int stride = 1,
                             int offset = 0);

// The step folders of a run, newest first.
std::vector<std::string> checkpoint_folders(const std::string& run_dir);

// Where every tensor of a checkpoint lies, and reads of any range of it.
class CheckpointReader {
 public:
  // InputError naming the folder when the manifest's tensors are malformed, or
  // (a checkpoint without parts) a tensor is stored in two files.
  CheckpointReader(std::string dir, const nlohmann::json& meta);

  struct Piece {
    std::string file;
    int64_t begin = 0, length = 0;  // of the tensor's elements, flattened
  };
  struct Entry {
    std::vector<int64_t> shape;
    at::ScalarType dtype = at::kFloat;
    std::vector<Piece> pieces;
  };
  const std::map<std::string, Entry>& tensors() const { return tensors_; }

  // Fills part.data with the saved elements of its range, from whichever files
  // hold them. InputError naming the checkpoint and tensor when the checkpoint
  // lacks it (unless part.optional), its shape differs from part.shape, or a
  // range of it is in no file.
  void read(const TensorPart& part) const;

 private:
  const TensorFileReader& file(const std::string& name) const;

  std::string dir_;
  std::map<std::string, Entry> tensors_;
  mutable std::map<std::string, std::unique_ptr<TensorFileReader>> files_;
};

// Loads one checkpoint folder whole, verifying every file against meta.json.
// Missing or corrupt files, checksum mismatches and a tensor present in two
// files are InputErrors naming the file.
LoadedCheckpoint load_checkpoint(const std::string& dir);

// Collective over `world` (every rank, CPU tensors): `dir`'s manifest once
// its files verify, the ranks sharing the checksumming. InputError naming the
// file otherwise, on every rank.
nlohmann::json verified_checkpoint_meta(Communicator& world, const std::string& dir);

struct VerifiedCheckpoint {
  std::string dir;
  nlohmann::json meta;
};
// Collective: the newest checkpoint of the run whose files verify; broken ones
// are skipped with a warning (rank 0's) naming the folder and the reason.
// nullopt when there is none. InputError when the ranks see different
// checkpoints (a run folder not on a shared file system).
std::optional<VerifiedCheckpoint> newest_verified_checkpoint(Communicator& world,
                                                             const std::string& run_dir);

// The manifest's name of a tensor dtype ("float32", "bfloat16", ...), and back
// (InputError naming `source` for a name it does not know).
std::string dtype_name(at::ScalarType dtype);
at::ScalarType dtype_from_name(const std::string& name, const std::string& source);

}  // namespace moelab
