#include "train/routing_dump.h"

#include <nlohmann/json.hpp>

#include "train/evaluator.h"

namespace moelab {

namespace {

using Json = nlohmann::json;

// An int64 tensor's rows ([n, k]) as nested lists.
Json rows_of(const torch::Tensor& ids_NK) {
  Json rows = Json::array();
  for (int64_t n = 0; n < ids_NK.size(0); ++n) {
    const torch::Tensor row = ids_NK[n].contiguous();
    rows.push_back(
        std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()));
  }
  return rows;
}

// One window: its tokens [S], and each MoE layer's kept experts [S, k].
Json window_row(const std::string& set, int64_t window, const torch::Tensor& tokens_S,
                const Tokenizer& tokenizer, const std::vector<int64_t>& layers,
                const std::vector<torch::Tensor>& kept_LSK) {
  Json row = {{"set", set},
              {"window", window},
              {"tokens", Json::array()},
              {"pieces", Json::array()},
              {"experts", Json::object()}};
  // One read of the window's ids, not a tensor element read per token.
  const torch::Tensor ids = tokens_S.contiguous();
  for (const int64_t* id = ids.data_ptr<int64_t>(); id != ids.data_ptr<int64_t>() + ids.numel();
       ++id) {
    row["tokens"].push_back(*id);
    row["pieces"].push_back(tokenizer.decode({int(*id)}));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    row["experts"][std::to_string(layers[l])] = rows_of(kept_LSK[l]);
  }
  return row;
}

}  // namespace

std::string token_routing_lines(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                                const Tokenizer& tokenizer, const std::string& set,
                                const std::vector<int64_t>& layers, const torch::Device& device) {
  std::string lines;
  int64_t window = 0;
  const auto one_pass = [&](const torch::Tensor& windows, bool /*padding: none at one rank*/) {
    const auto inputs_BS = windows.narrow(1, 0, windows.size(1) - 1);
    const auto targets_BS = windows.narrow(1, 1, windows.size(1) - 1);
    const ModelOutput out = model->forward(inputs_BS, targets_BS);
    const auto tokens_BS = inputs_BS.cpu();
    const int64_t B = tokens_BS.size(0), S = tokens_BS.size(1);
    std::vector<torch::Tensor> kept_LBSK;
    for (const MoeLayerStats& stats : out.moe_stats) {
      kept_LBSK.push_back(stats.kept_ids.cpu().view({B, S, -1}));
    }
    for (int64_t b = 0; b < B; ++b) {
      std::vector<torch::Tensor> kept_LSK;
      for (const torch::Tensor& kept_BSK : kept_LBSK) kept_LSK.push_back(kept_BSK[b]);
      const Json row = window_row(set, window++, tokens_BS[b], tokenizer, layers, kept_LSK);
      // A piece may end inside a UTF-8 character: replaced, not refused.
      lines += row.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    }
  };
  for_each_eval_batch(model, val, batch_seqs, nullptr, device, one_pass);
  return lines;
}

}  // namespace moelab
