#include "train/run_checkpoint.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/optimizer_state.h"
#include "checkpoint/stacked_tensors.h"
#include "checkpoint/tensor_file.h"
#include "comm/watchdog.h"
#include "config/load.h"
#include "util/error.h"
#include "util/version.h"

namespace moelab {
namespace {

const char* kRngKey = "rng/cpu_generator";

TensorMap tensors_of(const NamedParams& params, const TensorMap& optimizer_state) {
  TensorMap out;
  for (const auto& [name, p] : params) out[name] = p.detach().cpu();
  for (auto& [key, t] : optimizer_state) out[key] = t.cpu();
  return out;
}

nlohmann::json meta_of(const Config& cfg, const ProcessGroups& groups, const TrainState& s) {
  return {{"step", s.step},
          {"tokens", s.tokens},
          {"loader_samples", s.loader.samples},
          {"best_val_loss", std::isfinite(s.best_val_loss) ? nlohmann::json(s.best_val_loss)
                                                           : nlohmann::json(nullptr)},
          {"nonfinite_total", s.nonfinite_total},
          {"nonfinite_in_a_row", s.nonfinite_in_a_row},
          {"world_size", groups.world->size()},
          {"ep", groups.ep_size},
          {"git_commit", git_commit()},
          {"config", to_toml(cfg)}};
}

TrainState state_of(const nlohmann::json& meta, const std::string& dir) {
  try {
    TrainState s;
    s.step = meta.at("step").get<int64_t>();
    s.tokens = meta.at("tokens").get<int64_t>();
    // A checkpoint from before training mixtures records the loader as an
    // epoch and position instead: restore_run_checkpoint counts its samples.
    s.loader.samples = meta.value("loader_samples", int64_t{-1});
    if (!meta.at("best_val_loss").is_null()) s.best_val_loss = meta["best_val_loss"].get<double>();
    s.nonfinite_total = meta.at("nonfinite_total").get<int64_t>();
    s.nonfinite_in_a_row = meta.at("nonfinite_in_a_row").get<int64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(dir + "/meta.json: incomplete checkpoint metadata (" + e.what() + ")");
  }
}

void load_parameters(const NamedParams& params, const std::map<std::string, torch::Tensor>& saved,
                     const std::string& dir) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    auto it = saved.find(name);
    if (it == saved.end()) {
      throw InputError(dir + ": checkpoint has no tensor '" + name +
                       "'; it was saved from a different model config");
    }
    if (it->second.sizes() != p.sizes()) {
      throw InputError(dir + ": tensor '" + name + "' has shape " + c10::str(it->second.sizes()) +
                       " but the model expects " + c10::str(p.sizes()));
    }
    p.copy_(it->second.to(p.dtype()));
  }
}

}  // namespace

void save_run_checkpoint(const Config& cfg, const ParallelPlan& plan, const NamedParams& buffers,
                         const torch::optim::AdamW& optimizer, const TrainState& state) {
  LongPhase phase(WorkPhase::kCheckpointWrite);
  const ProcessGroups& groups = plan.groups();
  const NamedParams& experts = plan.experts().params();
  // Collective when the state is sharded: every rank takes part, and only the
  // ranks that write it (rank 0, and the first of each expert-data-parallel
  // group, which is in the first EP group) receive it whole.
  const TensorMap replicated_state = plan.replicated().shards().gather_state(optimizer);
  const TensorMap expert_state = plan.experts().shards().gather_state(optimizer);
  const std::string& run_dir = cfg.train.out_dir;
  const std::string tmp = checkpoint_tmp_dir(run_dir, state.step);
  auto& world = *groups.control;
  if (world.rank() == 0) prepare_checkpoint_tmp_dir(run_dir, state.step);
  world.barrier();
  if (world.rank() == 0) {
    auto tensors = tensors_of(plan.replicated().params(), replicated_state);
    for (const auto& [name, b] : buffers) tensors[name] = b.detach().cpu();
    tensors[kRngKey] = at::detail::getDefaultCPUGenerator().get_state();
    write_tensor_file(tmp + "/replicated.h5", tensors);
  }
  // One copy of each expert: the ranks of the first expert-parallel group.
  if (!experts.empty() && world.rank() < groups.ep_size) {
    write_tensor_file(tmp + "/experts_" + std::to_string(groups.ep_rank) + ".h5",
                      split_stacked(tensors_of(experts, expert_state), plan.stacked_parameters()));
  }
  world.barrier();
  if (world.rank() == 0) {
    finalize_checkpoint(run_dir, state.step, meta_of(cfg, groups, state), cfg.checkpoint.keep);
    spdlog::info("checkpoint saved: step {}", state.step);
  }
  world.barrier();
}

std::optional<TrainState> restore_run_checkpoint(const Config& cfg, const ParallelPlan& plan,
                                                 const NamedParams& buffers,
                                                 torch::optim::AdamW& optimizer) {
  const ProcessGroups& groups = plan.groups();
  const std::string& how = cfg.checkpoint.resume;
  if (how == "none") return std::nullopt;
  LongPhase phase(WorkPhase::kCheckpointRead);
  std::optional<LoadedCheckpoint> ckpt;
  if (how == "auto") {
    ckpt = load_latest_valid_checkpoint(cfg.train.out_dir);
    if (!ckpt) {
      spdlog::info("no checkpoint in {}: starting from step 0", cfg.train.out_dir);
      return std::nullopt;
    }
  } else {
    ckpt = load_checkpoint(how);
  }
  if (ckpt->meta.value("weights_only", false)) {
    throw InputError(ckpt->dir +
                     ": holds model weights only (written by moelab upcycle or convert), not a "
                     "run to resume; start a run from it with train.init_from");
  }
  TrainState state = state_of(ckpt->meta, ckpt->dir);
  // Every step consumes batch_seqs windows of seq_len tokens.
  if (state.loader.samples < 0) state.loader.samples = state.tokens / cfg.model.seq_len;
  // Every rank must resume from the same step, or the collectives would not line up.
  auto step = torch::tensor({state.step, -state.step}, torch::kLong);
  groups.control->all_reduce_max(step);
  if (step[0].item<int64_t>() != -step[1].item<int64_t>()) {
    throw InputError(ckpt->dir + ": ranks found different newest checkpoints");
  }
  ckpt->tensors = join_stacked(std::move(ckpt->tensors), plan.stacked_parameters(), ckpt->dir);
  load_parameters(plan.parameters(), ckpt->tensors, ckpt->dir);
  load_parameters(buffers, ckpt->tensors, ckpt->dir);
  for (const auto& group : plan.param_groups()) {
    const OptimizerShards& shards = group.shards();
    load_optimizer_state(optimizer, shards.slices(), shards.slice_state(ckpt->tensors));
  }
  auto rng = ckpt->tensors.find(kRngKey);
  if (rng != ckpt->tensors.end()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng->second);
  }
  spdlog::info("resumed from {} (step {})", ckpt->dir, state.step);
  return state;
}

void load_initial_weights(const std::string& dir, const NamedParams& params,
                          const StackedParams& stacked, const NamedParams& buffers) {
  LoadedCheckpoint ckpt = load_checkpoint(dir);
  ckpt.tensors = join_stacked(std::move(ckpt.tensors), stacked, dir);
  load_parameters(params, ckpt.tensors, dir);
  NamedParams saved_buffers;
  for (const auto& nb : buffers) {
    if (ckpt.tensors.count(nb.first)) saved_buffers.push_back(nb);
  }
  load_parameters(saved_buffers, ckpt.tensors, dir);
  spdlog::info("initial weights from {}", dir);
}

}  // namespace moelab
