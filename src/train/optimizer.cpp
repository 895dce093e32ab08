#include "train/optimizer.h"

#include "checkpoint/optimizer_state.h"

namespace moelab {
namespace {

// The tensors of one _fused_adamw_ call: all on one device, of one dtype.
struct FusedBatch {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
};

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  std::map<std::pair<std::string, int64_t>, torch::Tensor> steps;  // by device and step
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::map<std::pair<std::string, c10::ScalarType>, FusedBatch> batches;
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      auto& slot = state()[optimizer_state_key(param)];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(param, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(param, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& adam = static_cast<torch::optim::AdamWParamState&>(*slot);
      adam.step(adam.step() + 1);
      FusedBatch& batch = batches[{param.device().str(), param.scalar_type()}];
      batch.params.push_back(param);
      batch.grads.push_back(param.grad());
      batch.exp_avgs.push_back(adam.exp_avg());
      batch.exp_avg_sqs.push_back(adam.exp_avg_sq());
      // The kernel reads the already-incremented step as a float tensor on the
      // parameter's device, for the bias corrections. Parameters at the same step
      // share one: on CUDA each fresh tensor is a fill kernel, and a fine-grained
      // MoE has hundreds of expert tensors (6 of a 29 ms step on an H200).
      auto& step = steps[{param.device().str(), adam.step()}];
      if (!step.defined()) {
        step = torch::full({}, static_cast<double>(adam.step()),
                           torch::TensorOptions(torch::kFloat).device(param.device()));
      }
      batch.steps.push_back(step);
    }
    const auto [beta1, beta2] = options.betas();
    for (auto& [key, batch] : batches) {
      at::_fused_adamw_(batch.params, batch.grads, batch.exp_avgs, batch.exp_avg_sqs,
                        /*max_exp_avg_sqs=*/{}, batch.steps, options.lr(), beta1, beta2,
                        options.weight_decay(), options.eps(), /*amsgrad=*/false,
                        /*maximize=*/false);
    }
  }
  return loss;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const NamedParams& named_params,
                                                const OptimConfig& cfg) {
  std::vector<torch::Tensor> decayed;
  std::vector<torch::Tensor> not_decayed;
  for (const auto& [name, param] : named_params) {
    (param.dim() >= 2 ? decayed : not_decayed).push_back(param);
  }
  return make_adamw(std::move(decayed), std::move(not_decayed), cfg);
}

std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decayed,
                                                std::vector<torch::Tensor> not_decayed,
                                                const OptimConfig& cfg) {
  const auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(cfg.lr)
                                                            .betas({cfg.beta1, cfg.beta2})
                                                            .eps(cfg.eps)
                                                            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(cfg.weight_decay));
  groups.emplace_back(not_decayed, options(0.0));
  return std::make_unique<FusedAdamW>(std::move(groups), *options(cfg.weight_decay));
}

}  // namespace moelab
