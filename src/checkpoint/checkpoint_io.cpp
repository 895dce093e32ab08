#include "checkpoint/checkpoint_io.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "comm/failure.h"
#include "data/checksum.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMetaFile = "meta.json";
constexpr const char* kStepPrefix = "step_";
constexpr const char* kTmpSuffix = ".tmp";

fs::path checkpoints_root(const std::string& run_dir) {
  return fs::path(run_dir) / "checkpoints";
}

std::string step_folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%08lld", kStepPrefix, static_cast<long long>(step));
  return name;
}

// The step of a folder named step_<digits> (with `suffix` after them), if it is one.
std::optional<int64_t> parse_step(const std::string& name, const std::string& suffix) {
  const std::string prefix = kStepPrefix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix)) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

// Folders under <run>/checkpoints whose names are step_<n><suffix>, oldest first.
std::vector<std::pair<int64_t, fs::path>> step_folders(const std::string& run_dir,
                                                       const std::string& suffix) {
  std::vector<std::pair<int64_t, fs::path>> folders;
  const fs::path root = checkpoints_root(run_dir);
  if (!fs::is_directory(root)) return folders;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    if (auto step = parse_step(entry.path().filename().string(), suffix)) {
      folders.emplace_back(*step, entry.path());
    }
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

void remove_folder(const fs::path& folder) {
  std::error_code error;
  fs::remove_all(folder, error);
  if (error)
    spdlog::warn("could not remove old checkpoint {}: {}", folder.string(), error.message());
}

nlohmann::json read_meta(const fs::path& dir) {
  const fs::path meta_path = dir / kMetaFile;
  std::ifstream in(meta_path);
  if (!in) {
    throw InputError(meta_path.string() + ": missing; the checkpoint is incomplete");
  }
  nlohmann::json meta;
  try {
    in >> meta;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(meta_path.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!meta.is_object() || !meta.contains("step") || !meta["step"].is_number_integer() ||
      !meta.contains("files") || !meta["files"].is_object()) {
    throw InputError(meta_path.string() + ": expected an object with integer 'step' and 'files'");
  }
  return meta;
}

// Checks a file against its meta.json entry {"xxh64": hex, "bytes": n}.
void verify_file(const fs::path& file, const nlohmann::json& expected) {
  if (!fs::is_regular_file(file)) {
    throw InputError(file.string() + ": listed in meta.json but missing");
  }
  const auto bytes = static_cast<int64_t>(fs::file_size(file));
  if (expected.value("bytes", int64_t{-1}) != bytes) {
    throw InputError(file.string() + ": size " + std::to_string(bytes) +
                     " bytes differs from meta.json's " +
                     expected.value("bytes", nlohmann::json()).dump() + " (truncated?)");
  }
  const std::string actual = checksum_hex(xxhash64_file(file.string()));
  if (expected.value("xxh64", std::string()) != actual) {
    throw InputError(file.string() + ": checksum " + actual + " differs from meta.json's " +
                     expected.value("xxh64", std::string("<none>")) + " (corrupt)");
  }
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return (checkpoints_root(run_dir) / step_folder_name(step)).string();
}

std::string checkpoint_tmp_dir(const std::string& run_dir, int64_t step) {
  return checkpoint_dir(run_dir, step) + kTmpSuffix;
}

void prepare_checkpoint_tmp_dir(const std::string& run_dir, int64_t step) {
  const std::string dir = checkpoint_tmp_dir(run_dir, step);
  std::error_code error;
  fs::remove_all(dir, error);
  if (!error) fs::create_directories(dir, error);
  if (error) throw InputError(dir + ": cannot create checkpoint folder: " + error.message());
}

nlohmann::json describe_file(const std::string& path) {
  return {{"xxh64", checksum_hex(xxhash64_file(path))},
          {"bytes", static_cast<int64_t>(fs::file_size(path))}};
}

void seal_checkpoint(const std::string& run_dir, int64_t step, nlohmann::json manifest,
                     int64_t keep) {
  const std::string tmp_dir = checkpoint_tmp_dir(run_dir, step);
  if (!fs::is_directory(tmp_dir)) {
    throw InputError(tmp_dir + ": checkpoint folder to finalize does not exist");
  }
  manifest["step"] = step;
  write_file_durably((fs::path(tmp_dir) / kMetaFile).string(), manifest.dump(1) + "\n");

  const std::string final_dir = checkpoint_dir(run_dir, step);
  std::error_code error;
  fs::remove_all(final_dir, error);
  if (!error) fs::rename(tmp_dir, final_dir, error);
  if (error) {
    throw InputError("cannot rename " + tmp_dir + " to " + final_dir + ": " + error.message());
  }
  fsync_path(checkpoints_root(run_dir).string());

  for (const auto& [tmp_step, folder] : step_folders(run_dir, kTmpSuffix)) {
    if (tmp_step <= step) remove_folder(folder);
  }
  if (keep <= 0) return;
  const auto finished = step_folders(run_dir, "");
  const auto surplus = static_cast<int64_t>(finished.size()) - keep;
  for (int64_t i = 0; i < surplus; ++i) remove_folder(finished[static_cast<size_t>(i)].second);
}

void finalize_checkpoint(const std::string& run_dir, int64_t step, const nlohmann::json& meta,
                         int64_t keep) {
  nlohmann::json manifest = meta;
  manifest["files"] = nlohmann::json::object();
  for (const auto& entry : fs::directory_iterator(checkpoint_tmp_dir(run_dir, step))) {
    if (!entry.is_regular_file() || entry.path().extension() != ".h5") continue;
    manifest["files"][entry.path().filename().string()] = describe_file(entry.path().string());
    fsync_path(entry.path().string());
  }
  seal_checkpoint(run_dir, step, std::move(manifest), keep);
}

nlohmann::json read_checkpoint_meta(const std::string& dir) {
  if (!fs::is_directory(dir)) throw InputError(dir + ": checkpoint folder does not exist");
  return read_meta(dir);
}

void verify_checkpoint_files(const std::string& dir, const nlohmann::json& meta, int stride,
                             int offset) {
  int index = 0;
  for (const auto& [file_name, expected] : meta["files"].items()) {
    if (index++ % stride == offset) verify_file(fs::path(dir) / file_name, expected);
  }
}

std::vector<std::string> checkpoint_folders(const std::string& run_dir) {
  std::vector<std::string> newest_first;
  const auto folders = step_folders(run_dir, "");
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) newest_first.push_back(it->second);
  return newest_first;
}

LoadedCheckpoint load_checkpoint(const std::string& dir) {
  LoadedCheckpoint checkpoint;
  checkpoint.dir = dir;
  checkpoint.meta = read_checkpoint_meta(dir);
  checkpoint.step = checkpoint.meta["step"].get<int64_t>();
  verify_checkpoint_files(dir, checkpoint.meta);
  const CheckpointReader reader(dir, checkpoint.meta);
  for (const auto& [name, entry] : reader.tensors()) {
    torch::Tensor tensor = torch::empty(entry.shape, torch::dtype(entry.dtype));
    reader.read(whole_part(name, tensor));
    checkpoint.tensors[name] = tensor;
  }
  return checkpoint;
}

namespace {

// The meta of `dir` if its files verify; the agreed error otherwise.
std::pair<nlohmann::json, std::string> verify_shared(Communicator& world, const std::string& dir) {
  nlohmann::json meta;
  std::string error;
  try {
    meta = read_checkpoint_meta(dir);
    verify_checkpoint_files(dir, meta, world.size(), world.rank());
  } catch (const InputError& e) {
    error = e.what();
  }
  return {meta, agree_on_error(world, error)};
}

// Every rank must walk the same checkpoints, or the collectives would not line up.
void check_same_folders(Communicator& world, const std::vector<std::string>& folders,
                        const std::string& run_dir) {
  std::string joined;
  for (const auto& f : folders) joined += fs::path(f).filename().string() + "/";
  const auto digest = int64_t(std::hash<std::string>()(joined) >> 1);
  auto both = torch::tensor({digest, -digest}, torch::kLong);
  world.all_reduce_max(both);
  if (both[0].item<int64_t>() != -both[1].item<int64_t>()) {
    throw InputError(run_dir +
                     "/checkpoints: the ranks see different checkpoints (is the run "
                     "folder on a file system every host shares?)");
  }
}

}  // namespace

nlohmann::json verified_checkpoint_meta(Communicator& world, const std::string& dir) {
  auto [meta, error] = verify_shared(world, dir);
  if (!error.empty()) throw InputError(error);
  return meta;
}

std::optional<VerifiedCheckpoint> newest_verified_checkpoint(Communicator& world,
                                                             const std::string& run_dir) {
  const std::vector<std::string> folders = checkpoint_folders(run_dir);
  check_same_folders(world, folders, run_dir);
  for (const auto& dir : folders) {
    auto [meta, error] = verify_shared(world, dir);
    if (error.empty()) return VerifiedCheckpoint{dir, meta};
    if (world.rank() == 0) spdlog::warn("skipping checkpoint {}: {}", dir, error);
  }
  return std::nullopt;
}

}  // namespace moelab
