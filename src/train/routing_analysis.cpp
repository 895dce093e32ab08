#include "train/routing_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "data/dataset_info.h"
#include "data/tokenizer.h"
#include "train/checkpoint_model.h"
#include "train/evaluator.h"
#include "train/expert_distribution.h"
#include "train/routing_counts.h"
#include "train/routing_dump.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mpi_session.h"

namespace moelab {

namespace {

using Json = nlohmann::json;

std::vector<int64_t> row_of(const torch::Tensor& counts_LE, int64_t layer) {
  const torch::Tensor row = counts_LE[layer].contiguous();
  return std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
}

// One set's numbers at one layer.
Json set_layer_json(const std::vector<int64_t>& counts, int64_t top) {
  const std::vector<double> shares = shares_of(counts);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return {{"assignments", total},
          {"counts", counts},
          {"shares", shares},
          {"entropy", entropy_nats(shares)},
          {"top_experts", top_experts(shares, top)}};
}

// The divergence of every two sets, as [{"sets": [a, b], "jsd": value}].
Json pairwise_jsd(const std::vector<SetCounts>& sets,
                  const std::function<double(size_t, size_t)>& jsd) {
  Json pairs = Json::array();
  for (size_t a = 0; a < sets.size(); ++a) {
    for (size_t b = a + 1; b < sets.size(); ++b) {
      pairs.push_back({{"sets", {sets[a].name, sets[b].name}}, {"jsd", jsd(a, b)}});
    }
  }
  return pairs;
}

std::string csv_top(const Json& ids) {
  std::string text;
  for (const Json& id : ids) {
    if (!text.empty()) text += ' ';
    text += std::to_string(id.get<int64_t>());
  }
  return text;
}

void write_csvs(const Json& report, const std::string& dir) {
  std::string experts = "layer,set,expert,assignments,share\n";
  std::string sets = "layer,set,assignments,entropy,top_experts\n";
  std::string jsd = "layer,set_a,set_b,jsd\n";
  for (const Json& layer : report["layers"]) {
    const int64_t l = layer["layer"];
    for (const auto& [name, s] : layer["sets"].items()) {
      for (size_t e = 0; e < s["counts"].size(); ++e) {
        experts += fmt::format("{},{},{},{},{:.17g}\n", l, name, e, s["counts"][e].get<int64_t>(),
                               s["shares"][e].get<double>());
      }
      sets += fmt::format("{},{},{},{:.17g},{}\n", l, name, s["assignments"].get<int64_t>(),
                          s["entropy"].get<double>(), csv_top(s["top_experts"]));
    }
    for (const Json& pair : layer["jsd"]) {
      jsd += fmt::format("{},{},{},{:.17g}\n", l, pair["sets"][0].get<std::string>(),
                         pair["sets"][1].get<std::string>(), pair["jsd"].get<double>());
    }
  }
  for (const Json& pair : report["mean_jsd"]) {
    jsd += fmt::format("mean,{},{},{:.17g}\n", pair["sets"][0].get<std::string>(),
                       pair["sets"][1].get<std::string>(), pair["jsd"].get<double>());
  }
  write_file_atomically(dir + "/routing_experts.csv", experts);
  write_file_atomically(dir + "/routing_sets.csv", sets);
  write_file_atomically(dir + "/routing_jsd.csv", jsd);
}

// The block indices of the model's MoE layers, in order.
std::vector<int64_t> moe_layers(const Config& cfg) {
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) {
    if (cfg.moe.is_moe_layer(l)) layers.push_back(l);
  }
  return layers;
}

// --seq-len, or the model's context.
int64_t window_tokens(const Config& cfg, const RoutingAnalysisOptions& opts) {
  if (opts.seq_len > cfg.model.seq_len) {
    throw InputError("analyze routing: --seq-len " + std::to_string(opts.seq_len) +
                     " is longer than the model's context (model.seq_len " +
                     std::to_string(cfg.model.seq_len) + ")");
  }
  return opts.seq_len > 0 ? opts.seq_len : cfg.model.seq_len;
}

// One set's counts; a dataset that cannot be read is named by its --set.
SetCounts count_set(CheckpointModel& loaded, const RoutingSet& set,
                    const RoutingAnalysisOptions& opts) {
  const std::string arg = "--set " + set.name + "=" + set.dir;
  try {
    const int64_t max_windows = opts.batches * opts.batch_seqs;
    ValidationSet val(set.dir, opts.split, window_tokens(loaded.cfg, opts), max_windows);
    check_vocab_matches(val.info(), loaded.cfg.model.vocab_size);
    return {set.name, count_routed_assignments(loaded.model, val, opts.batch_seqs,
                                               loaded.plan->groups().dp.get(), loaded.device)};
  } catch (const InputError& error) {
    throw InputError("analyze routing: " + arg + ": " + error.what());
  }
}

}  // namespace

RoutingSet parse_routing_set(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    throw InputError("analyze routing: --set '" + arg +
                     "': expected NAME=DATASET (a name and a prepared dataset folder)");
  }
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

torch::Tensor count_routed_assignments(Transformer& model, const ValidationSet& val,
                                       int64_t batch_seqs, Communicator* dp,
                                       const torch::Device& device) {
  torch::Tensor counts_LE;
  for_each_eval_batch(model, val, batch_seqs, dp, device,
                      [&](const torch::Tensor& windows, bool padding) {
                        const auto inputs = windows.narrow(1, 0, windows.size(1) - 1);
                        const auto targets = windows.narrow(1, 1, windows.size(1) - 1);
                        // With targets: the fused loss, not the [B, S, V] logits.
                        const ModelOutput out = model->forward(inputs, targets);
                        if (out.moe_stats.empty()) {
                          throw InputError("analyze routing: the model has no MoE layer");
                        }
                        std::vector<torch::Tensor> kept;
                        for (const MoeLayerStats& s : out.moe_stats) kept.push_back(s.kept);
                        const torch::Tensor batch_LE = torch::stack(kept);
                        if (!counts_LE.defined()) counts_LE = torch::zeros_like(batch_LE);
                        if (!padding) counts_LE += batch_LE;
                      });
  // Summed in double (exact below 2^53) through the collectives every backend has.
  torch::Tensor total = counts_LE.to(torch::kDouble);
  if (dp && dp->size() > 1) dp->all_reduce_sum(total);
  return total.cpu().to(torch::kLong);
}

Json routing_report(const std::vector<SetCounts>& sets, const std::vector<int64_t>& layers,
                    int64_t top) {
  Json report = {{"sets", Json::array()}, {"layers", Json::array()}};
  for (const SetCounts& s : sets) report["sets"].push_back(s.name);
  std::vector<double> jsd_sum(sets.size() * sets.size(), 0.0);
  for (size_t i = 0; i < layers.size(); ++i) {
    Json layer = {{"layer", layers[i]}, {"sets", Json::object()}};
    std::vector<std::vector<double>> shares;
    for (const SetCounts& s : sets) {
      const std::vector<int64_t> counts = row_of(s.counts_LE, int64_t(i));
      layer["sets"][s.name] = set_layer_json(counts, top);
      shares.push_back(shares_of(counts));
    }
    layer["jsd"] = pairwise_jsd(sets, [&](size_t a, size_t b) {
      const double d = jensen_shannon_nats(shares[a], shares[b]);
      jsd_sum[a * sets.size() + b] += d;
      return d;
    });
    report["layers"].push_back(layer);
  }
  report["mean_jsd"] = pairwise_jsd(sets, [&](size_t a, size_t b) {
    return jsd_sum[a * sets.size() + b] / double(std::max<size_t>(layers.size(), 1));
  });
  return report;
}

void write_routing_report(const Json& report, const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_file_atomically(dir + "/routing.json", report.dump(1) + "\n");
  write_csvs(report, dir);
}

namespace {

// The --set arguments, each name once.
std::vector<RoutingSet> parse_routing_sets(const RoutingAnalysisOptions& opts) {
  if (opts.sets.empty()) throw InputError("analyze routing: give at least one --set NAME=DATASET");
  std::vector<RoutingSet> sets;
  std::set<std::string> names;
  for (const std::string& arg : opts.sets) {
    sets.push_back(parse_routing_set(arg));
    if (!names.insert(sets.back().name).second) {
      throw InputError("analyze routing: --set '" + arg + "': the name " + sets.back().name +
                       " is given twice");
    }
  }
  if (opts.dump_windows > 0 && MpiSession::size() > 1) {
    throw InputError("analyze routing: --dump-windows runs in one process (without mpirun)");
  }
  return sets;
}

// --dump-windows: each set's first windows token by token, in routing_tokens.jsonl.
void dump_token_routing(CheckpointModel& loaded, const std::vector<RoutingSet>& sets,
                        const RoutingAnalysisOptions& opts) {
  std::string lines;
  for (const RoutingSet& set : sets) {
    const ValidationSet val(set.dir, opts.split, window_tokens(loaded.cfg, opts),
                            opts.dump_windows);
    lines +=
        token_routing_lines(loaded.model, val, opts.batch_seqs, Tokenizer::from_dataset(set.dir),
                            set.name, moe_layers(loaded.cfg), loaded.device);
  }
  write_file_atomically(opts.out_dir + "/routing_tokens.jsonl", lines);
}

}  // namespace

Json analyze_routing(const RoutingAnalysisOptions& opts) {
  const std::vector<RoutingSet> sets = parse_routing_sets(opts);
  CheckpointModel loaded = load_checkpoint_model(opts.checkpoint, opts.ep);
  if (!loaded.cfg.moe.enabled) {
    throw InputError("analyze routing: " + opts.checkpoint + " is a dense model (no [moe])");
  }
  std::vector<SetCounts> counts;
  for (const RoutingSet& set : sets) counts.push_back(count_set(loaded, set, opts));
  Json report = routing_report(counts, moe_layers(loaded.cfg), opts.top);
  report["checkpoint"] = opts.checkpoint;
  report["step"] = loaded.step;
  report["split"] = opts.split;
  report["num_experts"] = loaded.cfg.moe.num_experts;
  report["seq_len"] = window_tokens(loaded.cfg, opts);
  for (const RoutingSet& set : sets) report["datasets"][set.name] = set.dir;
  if (MpiSession::rank() == 0) write_routing_report(report, opts.out_dir);
  if (opts.dump_windows > 0) dump_token_routing(loaded, sets, opts);
  return report;
}

}  // namespace moelab
