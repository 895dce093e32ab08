#include "checkpoint/optimizer_state.h"

#include <sstream>

#include "util/error.h"

namespace moelab {
namespace {

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

}  // namespace

void* optimizer_state_key(const torch::Tensor& param) {
  return param.unsafeGetTensorImpl();
}

std::string optimizer_state_name(const std::string& param_name, const std::string& field) {
  return "optim/" + param_name + "/" + field;
}

std::map<std::string, torch::Tensor> optimizer_state_tensors(const torch::optim::AdamW& optimizer,
                                                             const NamedParams& named_params) {
  std::map<std::string, torch::Tensor> tensors;
  const auto& states = optimizer.state();
  for (const auto& [name, param] : named_params) {
    const auto it = states.find(optimizer_state_key(param));
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
    states[optimizer_state_key(param)] = std::move(adam);
  }
}

}  // namespace moelab
