#include "convert/dot_moe.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "convert/balanced_assignment.h"
#include "convert/ffn_split.h"
#include "data/batch_loader.h"
#include "model/transformer.h"

namespace moelab {
namespace {

// One layer's learned assignment scores and router, and the MoE forward they make.
struct DotState {
  FfnWeights ffn;
  torch::Tensor scores;  // [d_ff, E]
  torch::Tensor router;  // [E, d]
  const DotOptions* o = nullptr;
  double aux_coef = 0;

  torch::Tensor plan() const { return sinkhorn(scores, o->temperature, o->sinkhorn_iterations); }

  torch::Tensor forward(const torch::Tensor& x, ModelOutput& out) const {
    const int64_t d = x.size(-1), experts = o->experts;
    const auto flat = x.reshape({-1, d}).to(torch::kFloat32);
    const auto h = torch::silu(flat.matmul(ffn.w1.t())) * flat.matmul(ffn.w3.t());
    const auto p = plan();
    const auto hard = one_hot_assignment(balanced_assignment(p), experts, p);
    const auto assignment = hard + p - p.detach();  // straight-through estimator
    const auto logits = flat.matmul(router.t());
    const auto probs = torch::softmax(logits, -1);
    const auto [top_logits, top_ids] = logits.topk(o->top_k, -1);
    const auto gates =
        torch::zeros_like(logits).scatter(1, top_ids, torch::softmax(top_logits, -1));
    const auto unit_weights = gates.matmul(assignment.t()) * double(o->top_k);
    // Switch balance loss: alpha * E * sum_i f_i * P_i, f without gradient.
    const auto f =
        torch::zeros({experts}, probs.options())
            .index_add_(0, top_ids.reshape(-1), torch::ones({top_ids.numel()}, probs.options())) /
        double(top_ids.numel());
    out.aux_loss = out.aux_loss + aux_coef * double(experts) * (f * probs.mean(0)).sum();
    return (h * unit_weights).matmul(ffn.w2.t()).view(x.sizes());
  }
};

}  // namespace

DotResult dot_calibrate(const DenseCheckpoint& dense, const DotOptions& o) {
  Config cfg = dense.cfg;
  cfg.train.precision = Precision::kFp32;
  Transformer model(model_settings(cfg));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) p.value().copy_(dense.tensors.at(p.key()));
  }
  for (auto& p : model->parameters()) p.requires_grad_(false);

  std::vector<DotState> states(size_t(cfg.model.n_layers));
  std::vector<torch::Tensor> learned;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) {
    DotState& s = states[size_t(l)];
    s.ffn = dense_ffn(dense, l);
    s.o = &o;
    s.aux_coef = cfg.moe.aux_loss_coef;
    const auto start = cluster_partition(s.ffn, o.experts, o.cluster_iterations, o.seed + l);
    s.scores = (one_hot_assignment(start, o.experts, s.ffn.w1) * o.score_init).requires_grad_();
    s.router =
        (torch::randn({o.experts, cfg.model.d_model}, gen) * o.router_init_std).requires_grad_();
    model->layers[size_t(l)]->as<Block>()->ffn_override =
        [&s](const torch::Tensor& x, ModelOutput& out) { return s.forward(x, out); };
  }
  std::vector<torch::Tensor> scores, routers;
  for (auto& s : states) {
    scores.push_back(s.scores);
    routers.push_back(s.router);
  }
  torch::optim::Adam optimizer(
      {torch::optim::OptimizerParamGroup(scores,
                                         std::make_unique<torch::optim::AdamOptions>(o.lr_scores)),
       torch::optim::OptimizerParamGroup(
           routers, std::make_unique<torch::optim::AdamOptions>(o.lr_router))});

  BatchLoader loader(cfg.data.dir, cfg.data.train_split, cfg.model.seq_len, cfg.train.batch_seqs, 0,
                     1, o.seed, 2);
  DotResult result;
  std::vector<double> losses;
  for (int64_t step = 0; step < o.steps; ++step) {
    const auto batch = loader.next();
    const auto input = batch.slice(1, 0, -1), target = batch.slice(1, 1);
    optimizer.zero_grad();
    const ModelOutput out = model->forward(input, target);
    const auto& lm = out.lm_loss;
    (lm + out.aux_loss).backward();
    optimizer.step();
    const double loss = lm.item<double>();
    losses.push_back(loss);
    if (step % 10 == 0 || step + 1 == o.steps) {
      spdlog::info("dot calibration step {}/{}: loss {:.4f}", step + 1, o.steps, loss);
    }
  }
  const size_t quarter = std::max<size_t>(1, losses.size() / 4);
  for (size_t i = 0; i < quarter; ++i) {
    result.first_loss += losses[i] / double(quarter);
    result.last_loss += losses[losses.size() - 1 - i] / double(quarter);
  }
  torch::NoGradGuard no_grad;
  for (auto& s : states) {
    result.layers.push_back({balanced_assignment(s.plan()), s.router.detach().clone()});
  }
  return result;
}

}  // namespace moelab
