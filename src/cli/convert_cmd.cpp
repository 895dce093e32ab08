// `moelab upcycle DENSE_CKPT --out DIR ...` and `moelab convert DENSE_CKPT
// --method random|cluster|dot --out DIR ...`: an MoE run's start from a dense
// checkpoint (src/convert/convert.h). Both write DIR/config.toml, which
// `moelab train DIR/config.toml` runs from the new weights.
#include <memory>

#include "cli/commands.h"
#include "convert/convert.h"
#include "util/mpi_session.h"

namespace moelab {
namespace {

void add_dense_overrides(CLI::App* cmd, std::vector<std::string>& overrides) {
  cmd->add_option("--set", overrides,
                  "override a key of the dense config, kept by the MoE's (repeatable): "
                  "--set data.dir=data/x (dot's calibration data), --set model.seq_len=512");
}

}  // namespace

void add_upcycle_command(CLI::App& root) {
  auto r = std::make_shared<UpcycleRequest>();
  auto* cmd = root.add_subcommand(
      "upcycle", "Turn a dense checkpoint's FFNs into copies (or slices) as routed experts");
  cmd->add_option("checkpoint", r->dense_checkpoint, "dense checkpoint folder")->required();
  cmd->add_option("--out", r->out, "output folder (config.toml and the weights)")->required();
  cmd->add_option("--experts", r->upcycle.experts, "experts per layer")->check(CLI::PositiveNumber);
  cmd->add_option("--top-k", r->top_k, "experts per token")->check(CLI::PositiveNumber);
  cmd->add_option("--granularity", r->upcycle.granularity,
                  "g > 1: experts are d_ff / g slices of the FFN, w2 times g")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reinit-fraction", r->upcycle.reinit_fraction,
                  "fraction of each expert's hidden units drawn anew (Drop-Upcycling)");
  cmd->add_option("--router-init-std", r->router_init_std,
                  "std of the new routers' weights (default: model.init_std)");
  cmd->add_option("--seed", r->upcycle.seed, "seed for re-drawn units and routers");
  add_dense_overrides(cmd, r->overrides);
  cmd->callback([r] {
    if (MpiSession::rank() == 0) upcycle_checkpoint(*r);
  });
}

void add_convert_command(CLI::App& root) {
  auto r = std::make_shared<ConvertRequest>();
  auto* cmd = root.add_subcommand(
      "convert", "Partition a dense checkpoint's FFN hidden units into disjoint routed experts");
  cmd->add_option("checkpoint", r->dense_checkpoint, "dense checkpoint folder")->required();
  cmd->add_option("--out", r->out, "output folder (config.toml and the weights)")->required();
  cmd->add_option("--method", r->method,
                  "random, cluster (balanced k-means) or dot (learned transport assignment)")
      ->check(CLI::IsMember({"random", "cluster", "dot"}));
  cmd->add_option("--experts", r->experts, "experts per layer (must divide d_ff)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top-k", r->top_k, "experts per token")->check(CLI::PositiveNumber);
  cmd->add_option("--cluster-iterations", r->cluster_iterations, "balanced k-means rounds")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--router-init-std", r->router_init_std,
                  "std of the new routers' weights (default: model.init_std)");
  cmd->add_option("--seed", r->seed, "seed for the partition and the routers");
  add_dense_overrides(cmd, r->overrides);
  cmd->add_option("--calibration-steps", r->dot.steps, "dot: calibration batches")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dot-temperature", r->dot.temperature, "dot: Sinkhorn temperature")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sinkhorn-iterations", r->dot.sinkhorn_iterations,
                  "dot: Sinkhorn-Knopp row/column scalings per forward")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dot-lr-scores", r->dot.lr_scores, "dot: Adam lr of the assignment scores");
  cmd->add_option("--dot-lr-router", r->dot.lr_router, "dot: Adam lr of the router");
  cmd->callback([r] {
    if (MpiSession::rank() == 0) convert_checkpoint(*r);
  });
}

}  // namespace moelab
