#include "kernels/softmax_route.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "kernels/cpu_loop.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Row r's softmax into p (e wide), returning its log-sum-exp; dot gets
// sum_j p_j l_j, from which the entropy is lse - dot.
template <typename T>
MOELAB_CPU_CLONES T softmax_row(const T* l, T* p, int64_t e, T& dot) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < e; ++j) m = std::max(m, l[j]);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < e; ++j) {
    p[j] = cpu::exp_approx(l[j] - m);
    sum += p[j];
  }
  const T inv = T(1) / sum;
  dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < e; ++j) {
    p[j] *= inv;
    dot += p[j] * l[j];
  }
  return m + std::log(sum);
}

// The k chosen experts' gates of one row: a softmax over their logits, or
// their probabilities.
template <typename T>
void gates_row(const T* l, const T* p, const int64_t* chosen, T* g, int64_t k, bool over_chosen) {
  if (!over_chosen) {
    for (int64_t s = 0; s < k; ++s) g[s] = p[chosen[s]];
    return;
  }
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t s = 0; s < k; ++s) m = std::max(m, l[chosen[s]]);
  T sum = 0;
  for (int64_t s = 0; s < k; ++s) sum += (g[s] = std::exp(l[chosen[s]] - m));
  for (int64_t s = 0; s < k; ++s) g[s] /= sum;
}

template <typename T>
void forward_range(const T* logits, const int64_t* chosen, T* probs, T* gates, T* lse, T* entropy,
                   int64_t begin, int64_t end, int64_t e, int64_t k, bool over_chosen) {
  for (int64_t r = begin; r < end; ++r) {
    T dot;
    lse[r] = softmax_row(logits + r * e, probs + r * e, e, dot);
    entropy[r] = lse[r] - dot;
    gates_row(logits + r * e, probs + r * e, chosen + r * k, gates + r * k, k, over_chosen);
  }
}

// The gradients reaching the rows, each null where its output took none.
template <typename T>
struct RowGrads {
  const T* dp;    // [T, E] d probs
  const T* dg;    // [T, k] d gates
  const T* dlse;  // [T] d lse
};

// d l_j = p_j (dp_j - <dp, p> + dlse), with the chosen probabilities' gates
// counted in dp; gates over the chosen add g_s (dg_s - <dg, g>) at theirs.
template <typename T>
MOELAB_CPU_CLONES void backward_row(const T* p, const T* g, const int64_t* chosen, const T* dp,
                                    const T* dg, T dlse, T* dl, int64_t e, int64_t k,
                                    bool over_chosen) {
  T dot = 0;
  if (dp) {
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < e; ++j) dot += dp[j] * p[j];
  }
  if (dg && !over_chosen) {
    for (int64_t s = 0; s < k; ++s) dot += dg[s] * p[chosen[s]];
  }
  const T shift = dlse - dot;
  if (dp) {
#pragma omp simd
    for (int64_t j = 0; j < e; ++j) dl[j] = p[j] * (dp[j] + shift);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < e; ++j) dl[j] = p[j] * shift;
  }
  if (!dg) return;
  T gate_dot = 0;
  if (over_chosen) {
    for (int64_t s = 0; s < k; ++s) gate_dot += dg[s] * g[s];
  }
  for (int64_t s = 0; s < k; ++s) {
    dl[chosen[s]] += over_chosen ? g[s] * (dg[s] - gate_dot) : p[chosen[s]] * dg[s];
  }
}

template <typename T>
void backward_range(const T* probs, const T* gates, const int64_t* chosen, const RowGrads<T>& in,
                    T* d_logits, int64_t begin, int64_t end, int64_t e, int64_t k,
                    bool over_chosen) {
  for (int64_t r = begin; r < end; ++r) {
    backward_row(probs + r * e, gates + r * k, chosen + r * k, in.dp ? in.dp + r * e : nullptr,
                 in.dg ? in.dg + r * k : nullptr, in.dlse ? in.dlse[r] : T(0), d_logits + r * e, e,
                 k, over_chosen);
  }
}

// A gradient as the loops read it: contiguous, of the saved outputs' dtype.
at::Tensor as_read(const at::Tensor& grad, const at::Tensor& like) {
  return grad.defined() ? grad.to(like.scalar_type()).contiguous() : grad;
}

struct SoftmaxRouteFunction : torch::autograd::Function<SoftmaxRouteFunction> {
  static tensor_list forward(AutogradContext* ctx, const at::Tensor& logits_in,
                             const at::Tensor& chosen_in, bool over_chosen) {
    const auto logits = logits_in.contiguous();
    const auto chosen = chosen_in.contiguous();
    const int64_t tokens = logits.size(0), e = logits.size(1), k = chosen.size(1);
    auto probs = torch::empty_like(logits);
    auto gates = torch::empty({tokens, k}, logits.options());
    auto lse = torch::empty({tokens}, logits.options());
    auto entropy = torch::empty({tokens}, logits.options());
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "softmax_route", [&] {
      at::parallel_for(0, tokens, cpu::row_grain(e), [&](int64_t begin, int64_t end) {
        forward_range<scalar_t>(logits.data_ptr<scalar_t>(), chosen.data_ptr<int64_t>(),
                                probs.data_ptr<scalar_t>(), gates.data_ptr<scalar_t>(),
                                lse.data_ptr<scalar_t>(), entropy.data_ptr<scalar_t>(), begin, end,
                                e, k, over_chosen);
      });
    });
    ctx->set_materialize_grads(false);  // an output no loss reads costs nothing
    ctx->mark_non_differentiable({entropy});
    ctx->save_for_backward({probs, gates, chosen});
    ctx->saved_data["over_chosen"] = over_chosen;
    return {probs, gates, lse, entropy};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &probs = saved[0], &gates = saved[1], &chosen = saved[2];
    const bool over_chosen = ctx->saved_data["over_chosen"].toBool();
    const auto dp = as_read(grads[0], probs), dg = as_read(grads[1], probs),
               dlse = as_read(grads[2], probs);
    const int64_t tokens = probs.size(0), e = probs.size(1), k = chosen.size(1);
    auto d_logits = torch::empty_like(probs);
    AT_DISPATCH_FLOATING_TYPES(probs.scalar_type(), "softmax_route_backward", [&] {
      const RowGrads<scalar_t> in{cpu::data_or_null<scalar_t>(dp), cpu::data_or_null<scalar_t>(dg),
                                  cpu::data_or_null<scalar_t>(dlse)};
      at::parallel_for(0, tokens, cpu::row_grain(e), [&](int64_t begin, int64_t end) {
        backward_range<scalar_t>(probs.data_ptr<scalar_t>(), gates.data_ptr<scalar_t>(),
                                 chosen.data_ptr<int64_t>(), in, d_logits.data_ptr<scalar_t>(),
                                 begin, end, e, k, over_chosen);
      });
    });
    return {d_logits, at::Tensor(), at::Tensor()};
  }
};

bool kernel_covers(const at::Tensor& logits_TE, const at::Tensor& chosen_TK) {
  const auto dtype = logits_TE.scalar_type();
  return logits_TE.device().is_cpu() && chosen_TK.device().is_cpu() &&
         (dtype == at::kFloat || dtype == at::kDouble) && logits_TE.numel() > 0;
}

}  // namespace

SoftmaxRoute softmax_route(const at::Tensor& logits_TE, const at::Tensor& chosen_TK,
                           bool gates_over_chosen) {
  TORCH_CHECK(logits_TE.dim() == 2 && chosen_TK.dim() == 2 &&
                  chosen_TK.size(0) == logits_TE.size(0) && chosen_TK.scalar_type() == torch::kLong,
              "softmax_route: expected logits [T, E] and int64 expert ids [T, k], got ",
              logits_TE.sizes(), " and ", chosen_TK.sizes());
  if (!kernel_covers(logits_TE, chosen_TK)) {
    return softmax_route_reference(logits_TE, chosen_TK, gates_over_chosen);
  }
  const auto out = SoftmaxRouteFunction::apply(logits_TE, chosen_TK, gates_over_chosen);
  return {out[0], out[1], out[2], out[3]};
}

SoftmaxRoute softmax_route_reference(const at::Tensor& logits_TE, const at::Tensor& chosen_TK,
                                     bool gates_over_chosen) {
  SoftmaxRoute out;
  out.probs_TE = torch::softmax(logits_TE, -1);
  out.gates_TK = gates_over_chosen ? torch::softmax(logits_TE.gather(-1, chosen_TK), -1)
                                   : out.probs_TE.gather(-1, chosen_TK);
  out.lse_T = torch::logsumexp(logits_TE, -1);
  torch::NoGradGuard no_grad;
  out.entropy_T = -(out.probs_TE * torch::log_softmax(logits_TE, -1)).sum(-1);
  return out;
}

}  // namespace moelab
