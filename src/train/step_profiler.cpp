#include "train/step_profiler.h"

#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>

#include "comm/watchdog.h"
#include "util/atomic_file.h"
#include "util/error.h"

#ifdef MOELAB_WITH_NCCL
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace moelab {
namespace fs = std::filesystem;
namespace profiler = torch::autograd::profiler;

namespace {

std::set<torch::profiler::impl::ActivityType> activities(bool cuda) {
  std::set<torch::profiler::impl::ActivityType> kinds = {torch::profiler::impl::ActivityType::CPU};
  if (cuda) kinds.insert(torch::profiler::impl::ActivityType::CUDA);
  return kinds;
}

fs::path profile_dir(const Config& cfg) {
  const fs::path dir = fs::path(cfg.train.out_dir) / "profile";
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw InputError(dir.string() + ": cannot create the folder: " + error.message());
  return dir;
}

}  // namespace

StepProfiler::StepProfiler(const Config& cfg, int rank, const torch::Device& device)
    : snapshot_step_(cfg.train.memory_snapshot_step), cuda_(device.is_cuda()) {
  const auto& steps = cfg.train.profile_steps;
  if (steps.size() == 2) {
    first_ = steps[0];
    last_ = steps[1];
  }
  this_rank_ = rank == 0 || cfg.train.profile_ranks == ProfileRanks::kAll;
  const fs::path dir = last_ >= first_ || snapshot_step_ > 0 ? profile_dir(cfg) : fs::path();
  trace_path_ = (dir / ("rank" + std::to_string(rank) + ".json")).string();
  snapshot_path_ = (dir / ("memory_snapshot_rank" + std::to_string(rank) + ".pickle")).string();
#ifdef MOELAB_WITH_NCCL
  // Allocations are recorded from the start, so the snapshot holds their history.
  if (snapshot_step_ > 0 && cuda_) {
    const std::optional<std::string> all = "all";
    torch::cuda::_record_memory_history(all, all, "all", 100000);
  }
#endif
}

StepProfiler::~StepProfiler() {
  if (!tracing_) return;
  try {
    write_trace();
  } catch (const std::exception& e) {
    spdlog::error("profiler trace {} not written: {}", trace_path_, e.what());
  }
}

void StepProfiler::before_step(int64_t step) {
  if (this_rank_ && step == first_ && last_ >= first_) start_trace();
}

void StepProfiler::after_step(int64_t step) {
  // Exporting a trace can outlast parallel.timeout_s on a rank that traces
  // while the others wait in their next collective.
  LongPhase phase(WorkPhase::kProfileExport);
  if (tracing_ && step == last_) write_trace();
  if (step == snapshot_step_ && cuda_) write_memory_snapshot();
}

void StepProfiler::start_trace() {
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities(cuda_));  // Kineto is set up before it starts
  profiler::enableProfiler(config, activities(cuda_));
  tracing_ = true;
}

void StepProfiler::write_trace() {
  tracing_ = false;
  const auto result = profiler::disableProfiler();
  const std::string temporary = temporary_path_for(trace_path_);
  result->save(temporary);
  commit_temporary(temporary, trace_path_);
  spdlog::info("profiler trace of steps {}-{}: {} (open in https://ui.perfetto.dev)", first_, last_,
               trace_path_);
}

void StepProfiler::write_memory_snapshot() {
#ifdef MOELAB_WITH_NCCL
  write_file_atomically(snapshot_path_, torch::cuda::_memory_snapshot_pickled());
  torch::cuda::_record_memory_history(std::nullopt);
  spdlog::info("CUDA memory snapshot after step {}: {} (open in https://pytorch.org/memory_viz)",
               snapshot_step_, snapshot_path_);
#endif
}

}  // namespace moelab
