#include "checkpoint/rank_write.h"

#include <torch/torch.h>
#include <chrono>
#include <cstdio>
#include <map>

#include "checkpoint/checkpoint_io.h"
#include "comm/watchdog.h"
#include "util/test_hooks.h"

namespace moelab {
namespace {

std::string rank_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank_%05d.h5", rank);
  return name;
}

// Test-only (util/test_hooks.h): one rank's write slowed down, reporting
// progress as it goes, as a slow file system would.
void test_delay(int rank) {
  const double delay_s =
      rank == test_hooks().slow_checkpoint_rank ? test_hooks().slow_checkpoint_s : 0;
  for (double slept = 0; slept < delay_s; slept += 0.1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    LongPhase::progress();
  }
}

}  // namespace

RankWrite::RankWrite(const std::string& dir, int rank, const TensorParts& parts, bool copy)
    : file_name_(rank_file_name(rank)), rank_(rank) {
  try {
    std::map<std::string, torch::Tensor> values;
    nlohmann::json tensors = nlohmann::json::object();
    for (const auto& part : parts) {
      if (part.data.numel() == 0) continue;
      values[part.name] =
          copy ? part.data.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true) : part.data;
      tensors[part.name] = {
          {"shape", part.shape},
          {"dtype", dtype_name(part.data.scalar_type())},
          {"parts",
           {{{"file", file_name_}, {"begin", part.begin}, {"length", part.data.numel()}}}}};
    }
    if (values.empty()) {
      state_ = State::kDone;
      return;
    }
    manifest_part_ = {{"files", nlohmann::json::object()}, {"tensors", tensors}};
    layout_ = create_tensor_file(dir + "/" + file_name_, values);
  } catch (const std::exception& e) {
    error_ = e.what();
    state_ = State::kFailed;
  }
}

RankWrite::~RankWrite() {
  wait();
}

void RankWrite::run() {
  if (!ended()) write();
}

void RankWrite::start() {
  if (!ended()) thread_ = std::thread([this] { write(); });
}

void RankWrite::wait() {
  if (thread_.joinable()) thread_.join();
}

void RankWrite::write() {
  try {
    test_delay(rank_);
    write_tensor_values(layout_, [](int64_t bytes) { LongPhase::progress(bytes); });
    manifest_part_["files"][file_name_] = describe_file(layout_.path);
    state_ = State::kDone;
  } catch (const std::exception& e) {
    error_ = e.what();
    state_ = State::kFailed;
  }
}

void merge_manifest_part(nlohmann::json& manifest, const nlohmann::json& part) {
  if (part.is_null()) return;
  for (const auto& [file, described] : part.at("files").items())
    manifest["files"][file] = described;
  for (const auto& [name, tensor] : part.at("tensors").items()) {
    nlohmann::json& entry = manifest["tensors"][name];
    if (entry.is_null()) {
      entry = tensor;
    } else {
      for (const auto& piece : tensor.at("parts")) entry["parts"].push_back(piece);
    }
  }
}

}  // namespace moelab
