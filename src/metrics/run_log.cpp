#include "metrics/run_log.h"

#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>

#include "comm/cuda_device.h"
#include "config/load.h"
#include "util/atomic_file.h"
#include "util/version.h"

namespace moelab {

nlohmann::json rank_places(Communicator& world) {
  constexpr int64_t kHostBytes = 256;  // a host name, NUL-padded, then the local rank
  auto mine = torch::zeros({1, kHostBytes + 1}, torch::kLong);
  char host[kHostBytes] = {};
  gethostname(host, kHostBytes - 1);
  auto row = mine.accessor<int64_t, 2>()[0];
  for (int64_t i = 0; i < kHostBytes && host[i] != '\0'; ++i) row[i] = host[i];
  row[kHostBytes] = node_local_rank();
  const auto all = world.all_gather(mine);
  const auto rows = all.accessor<int64_t, 2>();
  nlohmann::json places = nlohmann::json::array();
  for (int64_t r = 0; r < all.size(0); ++r) {
    std::string name;
    for (int64_t i = 0; i < kHostBytes && rows[r][i] != 0; ++i) name.push_back(char(rows[r][i]));
    places.push_back({{"rank", r}, {"host", name}, {"local_rank", rows[r][kHostBytes]}});
  }
  return places;
}

void write_run_files(const Config& cfg, const ProcessGroups& groups,
                     const PrecisionChoice& precision, const ExpertGemmChoice& expert_gemm,
                     const nlohmann::json& places) {
  std::filesystem::create_directories(cfg.train.out_dir);
  write_file_durably(cfg.train.out_dir + "/config.resolved.toml",
                     "# moelab " + std::string(git_commit()) + ", resolved from " + cfg.source +
                         "\n" + to_toml(cfg));
  nlohmann::json run = {{"git_commit", git_commit()},
                        {"config_source", cfg.source},
                        {"world_size", groups.world->size()},
                        {"ep", groups.ep_size},
                        {"backend", groups.backend},
                        {"layout", groups.layout()},
                        {"ranks", places},
                        {"threads_per_rank", torch::get_num_threads()},
                        {"precision", choice_name(precision.precision)},
                        {"precision_reason", precision.reason}};
  if (expert_gemm.path != ExpertGemm::kAuto) {
    run["expert_gemm"] = choice_name(expert_gemm.path);
    run["expert_gemm_reason"] = expert_gemm.reason;
  }
  write_file_durably(cfg.train.out_dir + "/run.json", run.dump(2) + "\n");
}

nlohmann::json moe_metrics(const std::vector<MoeLayerStats>& stats, Communicator& world) {
  if (stats.empty()) return nullptr;
  std::vector<torch::Tensor> parts;
  for (const auto& s : stats) {
    parts.push_back(s.load.to(torch::kCPU, torch::kDouble));
    parts.push_back(torch::stack({s.drop_fraction, s.router_entropy, s.ranks_per_token})
                        .to(torch::kCPU, torch::kDouble));
  }
  auto flat = torch::cat(parts);
  world.all_reduce_sum(flat);
  flat /= double(world.size());
  nlohmann::json load = nlohmann::json::array(), load_ratio = nlohmann::json::array(),
                 drop = nlohmann::json::array(), entropy = nlohmann::json::array(),
                 ranks = nlohmann::json::array();
  int64_t offset = 0;
  for (const auto& s : stats) {
    const auto layer_load = flat.narrow(0, offset, s.load.numel()).contiguous();
    load.push_back(std::vector<double>(layer_load.data_ptr<double>(),
                                       layer_load.data_ptr<double>() + layer_load.numel()));
    load_ratio.push_back((layer_load.max() / layer_load.mean()).item<double>());
    drop.push_back(flat[offset + s.load.numel()].item<double>());
    entropy.push_back(flat[offset + s.load.numel() + 1].item<double>());
    ranks.push_back(flat[offset + s.load.numel() + 2].item<double>());
    offset += s.load.numel() + 3;
  }
  return {{"expert_load", load},
          {"expert_load_max_over_mean", load_ratio},
          {"drop_fraction", drop},
          {"router_entropy", entropy},
          {"ranks_per_token", ranks}};
}

nlohmann::json phase_times_over_ranks(const nlohmann::json& time_ms, double work_ms,
                                      Communicator& world) {
  std::vector<std::string> phases;
  std::vector<double> mine;
  for (const auto& [phase, ms] : time_ms.items()) {
    phases.push_back(phase);
    mine.push_back(ms.get<double>());
  }
  phases.push_back("work");
  mine.push_back(work_ms);
  const int64_t n = int64_t(phases.size());
  const auto all = world.all_gather(torch::tensor(mine, torch::kDouble).reshape({1, n}));
  const auto slowest = all.select(1, n - 1).argmax().item<int64_t>();
  const auto mean = all.mean(0);
  nlohmann::json mean_ms, slowest_ms = {{"rank", slowest}};
  for (int64_t p = 0; p < n; ++p) {
    mean_ms[phases[p]] = mean[p].item<double>();
    slowest_ms[phases[p]] = all[slowest][p].item<double>();
  }
  return {{"time_ms_mean", mean_ms}, {"time_ms_slowest", slowest_ms}};
}

void write_done_file(const Config& cfg, const nlohmann::json& summary) {
  write_file_durably(cfg.train.out_dir + "/DONE", summary.dump(2) + "\n");
}

}  // namespace moelab
