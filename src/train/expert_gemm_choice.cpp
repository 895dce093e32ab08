#include "train/expert_gemm_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "comm/rank0s_choice.h"
#include "model/experts.h"
#include "util/error.h"

namespace moelab {
namespace {

std::vector<ExpertsImpl*> experts_of(TransformerImpl& model) {
  std::vector<ExpertsImpl*> out;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (auto* experts = module->as<ExpertsImpl>()) out.push_back(experts);
  }
  return out;
}

std::string describe(const ExpertShape& shape) {
  return fmt::format("{} experts of width {} on d_model {}, {} on {}", shape.experts,
                     fmt::join(shape.widths, "/"), shape.d_model, c10::toString(shape.dtype),
                     shape.device.str());
}

ExpertGemmChoice forced(const Config& cfg, const ExpertShape& shape) {
  const ExpertGemm path = cfg.train.expert_gemm;
  if (!can_run(path, shape)) {
    std::vector<std::string> paths;
    for (ExpertGemm p : runnable_paths(shape)) paths.push_back(choice_name(p));
    throw InputError(fmt::format(
        "{}: train.expert_gemm = \"{}\" cannot run this run's experts ({} per rank); these can: "
        "{}",
        cfg.source, choice_name(path), describe(shape), fmt::join(paths, ", ")));
  }
  return {path, "forced by train.expert_gemm"};
}

ExpertGemmChoice measured(const ExpertShape& shape, int64_t rows_per_expert, Communicator& world) {
  const auto start = std::chrono::steady_clock::now();
  const auto timings = time_expert_paths(shape, rows_per_expert);
  const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
  return {rank0s_choice(fastest_path(timings, rule_path(shape)), world),
          fmt::format("measured on rank 0 in {:.1f} s, {} at {} rows each, forward and "
                      "backward: {}",
                      spent.count(), describe(shape), rows_per_expert, describe(timings))};
}

ExpertGemmChoice resolve(const Config& cfg, const ExpertShape& shape, int64_t rows_per_expert,
                         std::optional<ExpertGemm> resumed, Communicator& world) {
  if (cfg.train.expert_gemm != ExpertGemm::kAuto) return forced(cfg, shape);
  const auto paths = runnable_paths(shape);
  if (paths.size() == 1) return {paths.front(), "the only path for " + describe(shape)};
  // A resumed run keeps its path, so that it continues bit for bit.
  if (resumed && can_run(*resumed, shape)) return {*resumed, "as the checkpoint resumed from ran"};
  return measured(shape, rows_per_expert, world);
}

}  // namespace

int64_t balanced_rows_per_expert(const Config& cfg, int64_t tokens, int64_t ep) {
  return std::max<int64_t>(1, tokens * cfg.moe.top_k * ep / cfg.moe.num_experts);
}

ExpertShape expert_shape(const Config& cfg, int64_t ep, torch::ScalarType dtype,
                         const torch::Device& device) {
  ExpertShape shape{cfg.model.d_model, {}, cfg.moe.num_experts / ep, dtype, device};
  for (int64_t e = 0; e < cfg.moe.num_experts; ++e) {
    const int64_t width = cfg.moe.expert_width(e);
    if (std::find(shape.widths.begin(), shape.widths.end(), width) == shape.widths.end()) {
      shape.widths.push_back(width);
    }
  }
  return shape;
}

ExpertGemmChoice choose_expert_gemm(const Config& cfg, TransformerImpl& model,
                                    const ExpertShape& shape, int64_t rows_per_expert,
                                    std::optional<ExpertGemm> resumed, Communicator& world) {
  const auto experts = experts_of(model);
  if (experts.empty()) return {};
  const ExpertGemmChoice choice = resolve(cfg, shape, rows_per_expert, resumed, world);
  for (ExpertsImpl* e : experts) e->set_path(choice.path);
  return choice;
}

}  // namespace moelab
