// One rank's file of a distributed checkpoint: its parts of the run's tensors
// in <tmp>/rank_<r>.h5, each a 1-D dataset named as its tensor, and what the
// manifest says of them. Prepared on the calling thread (the values copied to
// host memory when asked, the file's HDF5 structure made), then written,
// fsynced and checksummed, on that thread or on one of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "checkpoint/tensor_file.h"
#include "checkpoint/tensor_parts.h"

namespace moelab {

class RankWrite {
 public:
  // `copy`: the parts' values are copied to host memory now, so the tensors
  // they view may change (checkpoint.async); otherwise they must stay as they
  // are until written. A failure to prepare is kept, as a failed write is.
  RankWrite(const std::string& dir, int rank, const TensorParts& parts, bool copy);
  // Waits for a write still running on its own thread.
  ~RankWrite();
  RankWrite(const RankWrite&) = delete;
  RankWrite& operator=(const RankWrite&) = delete;

  // Writes on the calling thread, or on a new one.
  void run();
  void start();
  // Whether the write has ended (well or not), without waiting.
  bool ended() const { return state_.load() != State::kRunning; }
  // Waits for the thread, if one runs.
  void wait();
  // After the write: "" or what went wrong, with the system's reason.
  const std::string& error() const { return error_; }
  // After the write: {"files": {...}, "tensors": {...}} for the manifest
  // (merge_manifest_part), empty for a rank without parts.
  const nlohmann::json& manifest_part() const { return manifest_part_; }
  int64_t bytes() const { return layout_.bytes(); }

 private:
  enum class State { kRunning, kDone, kFailed };
  void write();

  TensorFileLayout layout_;
  std::string file_name_;
  int rank_;
  nlohmann::json manifest_part_;
  std::string error_;
  std::atomic<State> state_{State::kRunning};
  std::thread thread_;
};

// Adds one rank's manifest part to the whole manifest.
void merge_manifest_part(nlohmann::json& manifest, const nlohmann::json& part);

}  // namespace moelab
