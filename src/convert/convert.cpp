#include "convert/convert.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "checkpoint/run_start.h"
#include "convert/dense_to_moe.h"
#include "convert/dot_moe.h"
#include "convert/ffn_split.h"
#include "convert/upcycle.h"
#include "util/error.h"

namespace moelab {
namespace {

double router_std(double requested, const Config& cfg) {
  return requested >= 0 ? requested : cfg.model.init_std;
}

}  // namespace

std::string upcycle_checkpoint(const UpcycleRequest& r) {
  const DenseCheckpoint dense = load_dense_checkpoint(r.dense_checkpoint, r.overrides);
  const int64_t width = dense.cfg.model.d_ff / std::max<int64_t>(r.upcycle.granularity, 1);
  const Config moe_cfg =
      moe_config_from_dense(dense.cfg, dense.cfg.moe, r.upcycle.experts, r.top_k, width);
  UpcycleOptions options = r.upcycle;
  const auto make = [&](int64_t layer, const FfnWeights& ffn) {
    options.seed = r.upcycle.seed + uint64_t(layer);  // each layer re-draws its own units
    return upcycle_experts(ffn, options);
  };
  const TensorMap weights =
      moe_weights_from_dense(dense, moe_cfg, make, router_std(r.router_init_std, moe_cfg));
  const nlohmann::json provenance = {{"source", dense.dir},
                                     {"method", "upcycle"},
                                     {"experts", r.upcycle.experts},
                                     {"top_k", r.top_k},
                                     {"granularity", r.upcycle.granularity},
                                     {"reinit_fraction", r.upcycle.reinit_fraction},
                                     {"router_init_std", router_std(r.router_init_std, moe_cfg)},
                                     {"seed", r.upcycle.seed}};
  const std::string dir = write_run_start(r.out, moe_cfg, weights, provenance);
  spdlog::info("upcycled {}: {} experts of width {}, top-{} -> {}", dense.dir, r.upcycle.experts,
               width, r.top_k, dir);
  return dir;
}

std::string convert_checkpoint(const ConvertRequest& r) {
  if (r.method != "random" && r.method != "cluster" && r.method != "dot") {
    throw InputError("--method " + r.method + ": expected random, cluster or dot");
  }
  const DenseCheckpoint dense = load_dense_checkpoint(r.dense_checkpoint, r.overrides);
  const int64_t d_ff = dense.cfg.model.d_ff;
  if (r.experts < 1 || d_ff % r.experts != 0) {
    throw InputError("--experts " + std::to_string(r.experts) + ": must divide d_ff = " +
                     std::to_string(d_ff) + " (every expert gets d_ff / E hidden units)");
  }
  const Config moe_cfg =
      moe_config_from_dense(dense.cfg, dense.cfg.moe, r.experts, r.top_k, d_ff / r.experts);
  std::optional<DotResult> dot;
  if (r.method == "dot") {
    DotOptions o = r.dot;
    o.experts = r.experts;
    o.top_k = r.top_k;
    o.seed = r.seed;
    o.cluster_iterations = r.cluster_iterations;
    o.router_init_std = router_std(r.router_init_std, moe_cfg);
    dot = dot_calibrate(dense, o);
  }
  const auto make = [&](int64_t layer, const FfnWeights& ffn) {
    const uint64_t seed = r.seed + uint64_t(layer);
    const auto expert_of = dot ? dot->layers[size_t(layer)].expert_of_unit
                           : r.method == "random"
                               ? random_partition(d_ff, r.experts, seed)
                               : cluster_partition(ffn, r.experts, r.cluster_iterations, seed);
    return split_by_assignment(ffn, expert_of, r.experts, double(r.top_k));
  };
  TensorMap weights =
      moe_weights_from_dense(dense, moe_cfg, make, router_std(r.router_init_std, moe_cfg));
  nlohmann::json provenance = {{"source", dense.dir},
                               {"method", r.method},
                               {"experts", r.experts},
                               {"top_k", r.top_k},
                               {"cluster_iterations", r.cluster_iterations},
                               {"router_init_std", router_std(r.router_init_std, moe_cfg)},
                               {"seed", r.seed}};
  if (dot) {
    for (size_t l = 0; l < dot->layers.size(); ++l) {
      weights.at("layers." + std::to_string(l) + ".moe.router.weight").copy_(dot->layers[l].router);
    }
    provenance["dot"] = {{"calibration_steps", r.dot.steps},
                         {"temperature", r.dot.temperature},
                         {"sinkhorn_iterations", r.dot.sinkhorn_iterations},
                         {"lr_scores", r.dot.lr_scores},
                         {"lr_router", r.dot.lr_router},
                         {"score_init", r.dot.score_init},
                         {"first_loss", dot->first_loss},
                         {"last_loss", dot->last_loss}};
  }
  const std::string dir = write_run_start(r.out, moe_cfg, weights, provenance);
  spdlog::info("converted {} by {}: {} experts of width {}, top-{} -> {}", dense.dir, r.method,
               r.experts, d_ff / r.experts, r.top_k, dir);
  return dir;
}

}  // namespace moelab
