#include "checkpoint/run_checkpoint.h"

#include <spdlog/spdlog.h>

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <filesystem>
#include <functional>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/stacked_tensors.h"
#include "comm/failure.h"
#include "comm/gather_strings.h"
#include "comm/watchdog.h"
#include "config/choices.h"
#include "config/load.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/stopwatch.h"
#include "util/version.h"

namespace moelab {
namespace {

const char* kRngKey = "rng/cpu_generator";

nlohmann::json meta_of(const Config& cfg, int world_size, const TrainState& s) {
  return {{"step", s.step},
          {"tokens", s.tokens},
          {"loader_samples", s.loader.samples},
          {"best_val_loss", std::isfinite(s.best_val_loss) ? nlohmann::json(s.best_val_loss)
                                                           : nlohmann::json(nullptr)},
          {"nonfinite_total", s.nonfinite_total},
          {"nonfinite_in_a_row", s.nonfinite_in_a_row},
          {"expert_gemm", s.expert_gemm ? choice_name(*s.expert_gemm) : ""},
          {"precision", s.precision ? choice_name(*s.precision) : ""},
          {"world_size", world_size},
          {"ep", cfg.parallel.ep},
          {"shard_optimizer", cfg.parallel.shard_optimizer},
          {"git_commit", git_commit()},
          {"config", to_toml(cfg)},
          {"format", 2},
          {"files", nlohmann::json::object()},
          {"tensors", nlohmann::json::object()}};
}

// A choice a run records in meta.json: a spelling of E other than "auto" (a
// run records what it resolved), or "" where it recorded none.
template <typename E>
std::optional<E> recorded_choice(const nlohmann::json& meta, const char* key,
                                 const std::string& dir) {
  const std::string value = meta.value(key, "");
  const auto parsed = parse_choice<E>(value);
  if (value.empty() || (parsed && *parsed != E::kAuto)) return parsed;
  std::string expected;
  for (const auto& n : ChoiceNames<E>::names) {
    if (n.value != E::kAuto)
      expected += (expected.empty() ? "\"" : ", \"") + std::string(n.name) + "\"";
  }
  throw InputError(dir + "/meta.json: " + key + " = \"" + value + "\"; expected one of " +
                   expected);
}

TrainState state_of(const nlohmann::json& meta, const std::string& dir, int64_t seq_len) {
  try {
    TrainState s;
    s.step = meta.at("step").get<int64_t>();
    s.tokens = meta.at("tokens").get<int64_t>();
    // A checkpoint from before training mixtures records the loader as an
    // epoch and position instead: every step consumed seq_len-token windows.
    s.loader.samples = meta.value("loader_samples", s.tokens / seq_len);
    if (!meta.at("best_val_loss").is_null()) s.best_val_loss = meta["best_val_loss"].get<double>();
    s.nonfinite_total = meta.at("nonfinite_total").get<int64_t>();
    s.nonfinite_in_a_row = meta.at("nonfinite_in_a_row").get<int64_t>();
    s.expert_gemm = recorded_choice<ExpertGemm>(meta, "expert_gemm", dir);
    s.precision = recorded_choice<Precision>(meta, "precision", dir);
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(dir + "/meta.json: incomplete checkpoint metadata (" + e.what() + ")");
  }
}

// A resumed run computes what the saved one did: its [model] keys equal the
// checkpoint's, RoPE's above all, which shape no tensor the load would check.
// Only the initialisation's keys and the window (seq_len) may differ.
void require_same_model(const Config& cfg, const nlohmann::json& meta, const std::string& dir) {
  Config saved = saved_run_config(meta, dir);
  Config run = cfg;
  const auto saved_fields = schema(saved), run_fields = schema(run);
  for (size_t i = 0; i < run_fields.size(); ++i) {
    const std::string& key = run_fields[i].key;
    if (run_fields[i].section() != "model" || key == "model.init_std" ||
        key == "model.scaled_residual_init" || key == "model.seq_len") {
      continue;
    }
    const std::string value = run_fields[i].value_string(), was = saved_fields[i].value_string();
    if (value != was) {
      throw InputError(origin_of(cfg, key) + ": " + key + " = " + value + ", but " + dir +
                       " was saved with " + was +
                       "; a resumed run keeps its model (train.init_from starts a new run from "
                       "a checkpoint's weights)");
    }
  }
}

void remove_folder_quietly(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace

struct RunCheckpointer::Pending {
  int64_t step = 0;
  Stopwatch since_start;
  nlohmann::json manifest;  // rank 0: the run's metadata, which the ranks' parts join
  std::unique_ptr<RankWrite> write;
};

RunCheckpointer::RunCheckpointer(const Config& cfg, std::shared_ptr<Communicator> world,
                                 StackedParams stacked)
    : cfg_(cfg), world_(std::move(world)), stacked_(std::move(stacked)) {}

RunCheckpointer::~RunCheckpointer() = default;

void RunCheckpointer::save(const TensorParts& parts, const TrainState& state) {
  wait();
  start(parts, state);
  if (cfg_.checkpoint.async) {
    pending_->write->start();
    return;
  }
  LongPhase phase(WorkPhase::kCheckpointWrite);
  pending_->write->run();
  seal();
}

void RunCheckpointer::start(const TensorParts& parts, const TrainState& state) {
  LongPhase phase(WorkPhase::kCheckpointWrite);
  const std::string& run_dir = cfg_.train.out_dir;
  std::string error;
  if (world_->rank() == 0) {
    try {
      prepare_checkpoint_tmp_dir(run_dir, state.step);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  error = agree_on_error(*world_, error);
  if (!error.empty())
    throw SystemError("checkpoint at step " + std::to_string(state.step) + ": " + error);
  TensorParts rank_parts = split_stacked_parts(parts, stacked_);
  if (world_->rank() == 0) {
    rank_parts.push_back(whole_part(kRngKey, at::detail::getDefaultCPUGenerator().get_state()));
  }
  pending_ = std::make_unique<Pending>();
  pending_->step = state.step;
  if (world_->rank() == 0) pending_->manifest = meta_of(cfg_, world_->size(), state);
  pending_->write = std::make_unique<RankWrite>(checkpoint_tmp_dir(run_dir, state.step),
                                                world_->rank(), rank_parts, cfg_.checkpoint.async);
}

torch::Tensor RunCheckpointer::status() const {
  const bool ended = pending_ && pending_->write->ended();
  const bool failed = ended && !pending_->write->error().empty();
  return torch::tensor({ended && !failed ? 1.0 : 0.0, failed ? 1.0 : 0.0}, torch::kDouble);
}

void RunCheckpointer::on_status(const torch::Tensor& summed) {
  if (!pending_) return;
  if (summed[1].item<double>() > 0 || summed[0].item<double>() == world_->size()) seal();
}

void RunCheckpointer::wait() {
  if (!pending_) return;
  {
    LongPhase phase(WorkPhase::kCheckpointWrite);
    pending_->write->wait();
  }
  seal();
}

void RunCheckpointer::seal() {
  const std::unique_ptr<Pending> p = std::move(pending_);
  p->write->wait();
  LongPhase phase(WorkPhase::kCheckpointWrite);
  const std::string& run_dir = cfg_.train.out_dir;
  std::string error = agree_on_error(*world_, p->write->error());
  if (error.empty()) {
    const auto parts = gather_strings(*world_, p->write->manifest_part().dump(), 0);
    std::string sealing;
    if (world_->rank() == 0) {
      try {
        for (const auto& part : parts)
          merge_manifest_part(p->manifest, nlohmann::json::parse(part));
        seal_checkpoint(run_dir, p->step, std::move(p->manifest), cfg_.checkpoint.keep);
        spdlog::info("checkpoint saved: step {} ({:.2f} s after it began)", p->step,
                     p->since_start.seconds());
      } catch (const std::exception& e) {
        sealing = e.what();
      }
    }
    error = agree_on_error(*world_, sealing);
  }
  if (error.empty()) return;
  if (world_->rank() == 0) remove_folder_quietly(checkpoint_tmp_dir(run_dir, p->step));
  world_->barrier();  // removed before any rank ends the job
  throw SystemError("checkpoint at step " + std::to_string(p->step) + " failed: " + error +
                    "; its partial files are removed and the newest complete checkpoint is the "
                    "one --resume auto takes");
}

void RunCheckpointer::read(const std::string& dir, const nlohmann::json& meta,
                           const TensorParts& parts) {
  std::string error;
  try {
    const CheckpointReader reader(dir, meta);
    const TensorParts rows = split_stacked_parts(parts, stacked_, /*separate_steps=*/true);
    for (const auto& part : rows) {
      reader.read(part);
      LongPhase::progress(part.data.nbytes());
    }
    join_stacked_steps(parts, rows, stacked_, dir);
  } catch (const InputError& e) {
    error = e.what();
  }
  agree_or_throw(*world_, error);
}

Config saved_run_config(const nlohmann::json& meta, const std::string& dir,
                        const std::vector<std::string>& overrides) {
  if (!meta.is_object() || !meta.contains("config") || !meta["config"].is_string()) {
    throw InputError(dir + "/meta.json: no \"config\" entry; not a moelab run checkpoint");
  }
  return parse_config(meta["config"].get<std::string>(), dir + "/meta.json", overrides);
}

std::optional<TrainState> RunCheckpointer::restore(const TensorParts& parts) {
  const std::string& how = cfg_.checkpoint.resume;
  if (how == "none") return std::nullopt;
  LongPhase phase(WorkPhase::kCheckpointRead);
  const std::optional<VerifiedCheckpoint> found =
      how == "auto" ? newest_verified_checkpoint(*world_, cfg_.train.out_dir)
                    : VerifiedCheckpoint{how, verified_checkpoint_meta(*world_, how)};
  if (!found) {
    spdlog::info("no checkpoint in {}: starting from step 0", cfg_.train.out_dir);
    return std::nullopt;
  }
  const auto& [dir, meta] = *found;
  if (meta.value("weights_only", false)) {
    throw InputError(dir +
                     ": holds model weights only (written by moelab upcycle or convert), not a "
                     "run to resume; start a run from it with train.init_from");
  }
  require_same_model(cfg_, meta, dir);
  const TrainState state = state_of(meta, dir, cfg_.model.seq_len);
  torch::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
  TensorParts with_rng = parts;
  with_rng.push_back(whole_part(kRngKey, rng));
  with_rng.back().optional = true;  // checkpoints from before it was saved
  read(dir, meta, with_rng);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_state(rng);  // as it was, where the checkpoint holds none
  spdlog::info("resumed from {} (step {})", dir, state.step);
  return state;
}

void RunCheckpointer::load_weights(const std::string& dir, const TensorParts& parts) {
  LongPhase phase(WorkPhase::kCheckpointRead);
  read(dir, verified_checkpoint_meta(*world_, dir), parts);
  spdlog::info("initial weights from {}", dir);
}

}  // namespace moelab
