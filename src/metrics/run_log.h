// What rank 0 writes about a run besides the curves' files (metrics_log.h): the
// resolved config and run.json at start, per-layer router statistics for a
// metrics line, and DONE at the end.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "comm/process_groups.h"
#include "config/config.h"
#include "model/expert_gemm.h"
#include "model/moe_layer.h"
#include "model/precision.h"

namespace moelab {

// Where each rank runs: [{"rank", "host", "local_rank"}] in rank order, the
// local rank being the one that selects a GPU (comm/cuda_device.h). Collective
// over `world`.
nlohmann::json rank_places(Communicator& world);

// config.resolved.toml (with the commit) and run.json (commit, world layout,
// where each rank runs, threads, precision and the experts' GEMM path, and why).
void write_run_files(const Config& cfg, const ProcessGroups& groups,
                     const PrecisionChoice& precision, const ExpertGemmChoice& expert_gemm,
                     const nlohmann::json& places);

// Per-layer expert load (each expert's share of assignments), its max/mean,
// drop fraction and router entropy, averaged over every rank (collective over
// `world`); null for a dense model.
nlohmann::json moe_metrics(const std::vector<MoeLayerStats>& stats, Communicator& world);

// The straggler view of one step (`time_ms`, this rank's phases, and
// `work_ms`, its own work: the step less its time in collectives). In
// synchronous training every rank's step takes about as long as the slowest
// one's, the others waiting for it in collectives, so the straggler is the
// rank with the most own work: {"time_ms_mean": per phase and "work", the mean
// over ranks; "time_ms_slowest": that rank's phases, "work" and "rank"}.
// Collective over `world`.
nlohmann::json phase_times_over_ranks(const nlohmann::json& time_ms, double work_ms,
                                      Communicator& world);

// The run's DONE file: its summary as JSON, written durably.
void write_done_file(const Config& cfg, const nlohmann::json& summary);

}  // namespace moelab
