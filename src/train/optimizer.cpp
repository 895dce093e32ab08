#include "train/optimizer.h"

#include "util/error.h"

namespace moelab {
namespace {

// LibTorch keys per-parameter optimizer state by the address of the tensor's impl.
void* state_key(const torch::Tensor& param) {
  return param.unsafeGetTensorImpl();
}

const torch::Tensor& state_entry(const std::map<std::string, torch::Tensor>& state,
                                 const std::string& param_name, const std::string& field) {
  const auto it = state.find(optimizer_state_name(param_name, field));
  if (it == state.end()) {
    throw InputError("optimizer state has no '" + field + "' for parameter '" + param_name +
                     "' (checkpoint from a different model?)");
  }
  return it->second;
}

torch::Tensor moment_like(const torch::Tensor& saved, const torch::Tensor& param,
                          const std::string& param_name, const std::string& field) {
  if (saved.sizes() != param.sizes()) {
    std::ostringstream message;
    message << "optimizer state '" << optimizer_state_name(param_name, field) << "' has shape "
            << saved.sizes() << " but the parameter has shape " << param.sizes();
    throw InputError(message.str());
  }
  return saved.to(param.options(), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

// The tensors of one _fused_adamw_ call: all on one device, of one dtype.
struct FusedBatch {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
};

}  // namespace

std::string optimizer_state_name(const std::string& param_name, const std::string& field) {
  return "optim/" + param_name + "/" + field;
}

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
      auto& slot = state()[state_key(param)];
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

std::map<std::string, torch::Tensor> optimizer_state_tensors(const torch::optim::AdamW& optimizer,
                                                             const NamedParams& named_params) {
  std::map<std::string, torch::Tensor> tensors;
  const auto& states = optimizer.state();
  for (const auto& [name, param] : named_params) {
    const auto it = states.find(state_key(param));
    if (it == states.end()) {
      tensors[optimizer_state_name(name, "exp_avg")] = torch::zeros_like(param);
      tensors[optimizer_state_name(name, "exp_avg_sq")] = torch::zeros_like(param);
      tensors[optimizer_state_name(name, "step")] = torch::tensor(int64_t{0});
      continue;
    }
    const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    tensors[optimizer_state_name(name, "exp_avg")] = adam.exp_avg();
    tensors[optimizer_state_name(name, "exp_avg_sq")] = adam.exp_avg_sq();
    tensors[optimizer_state_name(name, "step")] = torch::tensor(adam.step());
  }
  return tensors;
}

void load_optimizer_state(torch::optim::AdamW& optimizer, const NamedParams& named_params,
                          const std::map<std::string, torch::Tensor>& state) {
  auto& states = optimizer.state();
  for (const auto& [name, param] : named_params) {
    const torch::Tensor& step = state_entry(state, name, "step");
    if (step.numel() != 1) {
      throw InputError("optimizer state '" + optimizer_state_name(name, "step") +
                       "' must hold one number, found " + std::to_string(step.numel()));
    }
    auto adam = std::make_unique<torch::optim::AdamWParamState>();
    adam->step(step.item<int64_t>());
    adam->exp_avg(moment_like(state_entry(state, name, "exp_avg"), param, name, "exp_avg"));
    adam->exp_avg_sq(
        moment_like(state_entry(state, name, "exp_avg_sq"), param, name, "exp_avg_sq"));
    states[state_key(param)] = std::move(adam);
  }
}

}  // namespace moelab
