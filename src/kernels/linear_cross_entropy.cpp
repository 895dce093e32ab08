#include "kernels/linear_cross_entropy.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

c10::ScalarType stat_dtype(c10::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat32;
}

struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t ignore_index, int64_t chunk_rows, bool grads) {
    const int64_t rows = hidden.size(0);
    const auto stat = stat_dtype(hidden.scalar_type());
    const auto valid = targets != ignore_index;
    const auto safe_targets = targets.masked_fill(valid.logical_not(), 0).unsqueeze(1);
    const auto valid_stat = valid.to(stat).unsqueeze(1);
    auto grad_hidden = grads ? torch::empty_like(hidden) : torch::Tensor();
    // fp32 accumulation across chunks whatever the compute dtype.
    auto grad_weight =
        grads ? torch::zeros(weight.sizes(), weight.options().dtype(stat)) : torch::Tensor();
    auto loss_sum = torch::zeros({}, hidden.options().dtype(stat));
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const auto h = hidden.narrow(0, start, n);
      const auto t = safe_targets.narrow(0, start, n);
      const auto v = valid_stat.narrow(0, start, n);
      auto log_probs = torch::log_softmax(torch::mm(h, weight.t()), 1, stat);  // [n, V]
      loss_sum -= (log_probs.gather(1, t) * v).sum();
      if (!grads) continue;
      // d(loss_sum)/d(logits) = softmax - one_hot(target) on valid rows. Ignored
      // rows are zeroed through the [n, d] operands, not the [n, V] gradient.
      auto grad_logits = log_probs.exp_();
      grad_logits.scatter_add_(1, t, -v);
      grad_logits = grad_logits.to(hidden.scalar_type());
      auto grad_h = grad_hidden.narrow(0, start, n);
      torch::mm_out(grad_h, grad_logits, weight);
      grad_h.mul_(v.to(grad_h.scalar_type()));
      const auto h_valid = h * v.to(h.scalar_type());
      if (grad_logits.scalar_type() == stat) {
        grad_weight.addmm_(grad_logits.t(), h_valid);
      } else {
        grad_weight.add_(torch::mm(grad_logits.t(), h_valid));
      }
    }
    const auto count = valid.sum().to(stat);
    if (grads) {
      ctx->save_for_backward({grad_hidden, grad_weight.to(weight.scalar_type()), count});
    }
    return (loss_sum / count).to(stat);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto scale = grads[0] / saved[2];  // d(mean)/d(sum) times the upstream gradient
    return {saved[0] * scale.to(saved[0].scalar_type()),
            saved[1] * scale.to(saved[1].scalar_type()),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t ignore_index,
                                   int64_t chunk_rows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1) &&
                  targets.dim() == 1 && targets.size(0) == hidden.size(0),
              "linear_cross_entropy: expected hidden [N, d], weight [V, d], targets [N]; got ",
              hidden.sizes(), ", ", weight.sizes(), ", ", targets.sizes());
  if (chunk_rows <= 0) {
    // About 4 MB of fp32 logits per chunk on the CPU, where they stay in cache;
    // 256 MB on a GPU, where each chunk costs kernel launches.
    const int64_t elements = hidden.is_cuda() ? int64_t{1} << 26 : int64_t{1} << 20;
    chunk_rows = std::max<int64_t>(1, elements / std::max<int64_t>(weight.size(0), 1));
  }
  // Gradients are made in the forward pass, so only when a backward can follow.
  const bool grads =
      torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return LinearCrossEntropyFunction::apply(hidden, weight, targets, ignore_index, chunk_rows,
                                           grads);
}

torch::Tensor linear_cross_entropy_reference(const torch::Tensor& hidden,
                                             const torch::Tensor& weight,
                                             const torch::Tensor& targets, int64_t ignore_index) {
  const auto logits = torch::mm(hidden, weight.t()).to(stat_dtype(hidden.scalar_type()));
  return torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignore_index));
}

}  // namespace moelab
