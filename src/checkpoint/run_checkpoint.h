// A run's checkpoints: every rank writes the parts it owns of the model and
// optimizer tensors into its own file of the step's folder, in parallel, and
// rank 0 the manifest (checkpoint_io.h) naming every part and file with its
// checksum; the folder is renamed into place only then. A checkpoint loads at
// any world size, expert-parallel layout and optimizer sharding: each rank
// reads the ranges it needs from whichever files hold them. Checkpoints of one
// file per tensor kind, written before distributed writing, load the same way.
//
// With checkpoint.async the step waits only for a copy of this rank's parts
// into host memory; a thread per rank writes, fsyncs and checksums them while
// training goes on. Ranks agree that every write ended through the step's own
// reduction (status() and on_status()), and rank 0 then seals the checkpoint.
// The next checkpoint, a stop signal or the end of the run waits for a write
// still running (wait()). A write that fails, here or on any rank, ends the
// run with that rank's reason; its partial files are removed and the previous
// checkpoint stays the newest.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/rank_write.h"
#include "checkpoint/tensor_parts.h"
#include "comm/communicator.h"
#include "config/config.h"
#include "data/batch_loader.h"
#include "model/experts.h"

namespace moelab {

struct TrainState {
  int64_t step = 0;
  int64_t tokens = 0;
  LoaderState loader;
  double best_val_loss = std::numeric_limits<double>::infinity();
  int64_t nonfinite_total = 0;
  int64_t nonfinite_in_a_row = 0;
  // The path the routed experts' GEMMs ran (none without routed experts or in
  // a checkpoint from before the choice); never kAuto.
  std::optional<ExpertGemm> expert_gemm;
  // The precision the matmuls ran in (none in a checkpoint from before it was
  // recorded); never kAuto.
  std::optional<Precision> precision;
};

// The config of the run that wrote a checkpoint, as its manifest `meta`
// records it, with `overrides` applied. InputError naming the checkpoint when
// the manifest records none (weights written by upcycle, convert or import).
Config saved_run_config(const nlohmann::json& meta, const std::string& dir,
                        const std::vector<std::string>& overrides = {});

class RunCheckpointer {
 public:
  // `world`: every rank, over MPI with CPU tensors. `stacked`: the model's
  // stacked expert parameters, which checkpoints hold one tensor per expert.
  RunCheckpointer(const Config& cfg, std::shared_ptr<Communicator> world, StackedParams stacked);
  ~RunCheckpointer();

  // Collective. Checkpoints `state` with this rank's `parts` (views of the live
  // tensors: the replicated tensors' parts split among the ranks holding them,
  // each written once): after the previous checkpoint is sealed, writes them
  // and seals this one, or with checkpoint.async copies them and returns.
  void save(const TensorParts& parts, const TrainState& state);
  // This rank's background write as [ended well, failed] (1 or 0 each), all
  // zero while none is in flight: summed over the ranks by the step's reduction.
  torch::Tensor status() const;
  // Collective, with status() summed over every rank: seals the write once all
  // ranks ended it well; ends the run when one failed.
  void on_status(const torch::Tensor& summed);
  // Collective: waits for a write still running and seals it.
  void wait();

  // Collective. Per checkpoint.resume: "none" → nullopt; "auto" → the newest
  // checkpoint of the run folder that verifies (nullopt if there is none); a
  // path → that checkpoint. Reads the saved values into `parts` (this rank's
  // ranges) and the CPU generator's state. InputError naming the checkpoint
  // and tensor when they do not fit the model.
  std::optional<TrainState> restore(const TensorParts& parts);
  // Collective: train.init_from's weights (any checkpoint of the same model, or
  // one `moelab upcycle` / `convert` wrote) into `parts`.
  void load_weights(const std::string& dir, const TensorParts& parts);

 private:
  struct Pending;
  void start(const TensorParts& parts, const TrainState& state);
  void seal();
  void read(const std::string& dir, const nlohmann::json& meta, const TensorParts& parts);

  const Config cfg_;
  std::shared_ptr<Communicator> world_;
  StackedParams stacked_;
  std::unique_ptr<Pending> pending_;
};

}  // namespace moelab
