#include "convert/upcycle.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>

#include "util/error.h"

namespace moelab {
namespace {

// Redraws `rows` of m (dim 0) from normal(mean, std) of the whole of `like`.
void redraw(torch::Tensor& m, const torch::Tensor& rows, const torch::Tensor& like,
            at::Generator& gen) {
  auto fresh = torch::empty({rows.numel(), m.size(1)}, m.options());
  fresh.normal_(like.mean().item<double>(), like.std().item<double>(), gen);
  m.index_copy_(0, rows, fresh);
}

}  // namespace

std::vector<FfnWeights> upcycle_experts(const FfnWeights& ffn, const UpcycleOptions& o) {
  const int64_t d_ff = ffn.width();
  if (o.granularity < 1 || d_ff % o.granularity != 0 || o.experts % o.granularity != 0) {
    throw InputError("--granularity " + std::to_string(o.granularity) +
                     ": must divide both d_ff (" + std::to_string(d_ff) +
                     ") and the expert count (" + std::to_string(o.experts) + ")");
  }
  if (!(o.reinit_fraction >= 0.0 && o.reinit_fraction <= 1.0)) {
    throw InputError("--reinit-fraction " + std::to_string(o.reinit_fraction) +
                     ": expected a fraction in [0, 1]");
  }
  const int64_t width = d_ff / o.granularity;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  torch::NoGradGuard no_grad;
  std::vector<FfnWeights> experts;
  for (int64_t e = 0; e < o.experts; ++e) {
    const int64_t begin = (e % o.granularity) * width;
    FfnWeights x{ffn.w1.slice(0, begin, begin + width).clone(),
                 ffn.w3.slice(0, begin, begin + width).clone(),
                 ffn.w2.slice(1, begin, begin + width) * double(o.granularity)};
    const auto drop = static_cast<int64_t>(std::llround(o.reinit_fraction * double(width)));
    if (drop > 0) {
      const auto rows = torch::randperm(width, gen, torch::kLong).slice(0, 0, drop);
      redraw(x.w1, rows, ffn.w1, gen);
      redraw(x.w3, rows, ffn.w3, gen);
      auto w2t = x.w2.t().contiguous();
      redraw(w2t, rows, ffn.w2 * double(o.granularity), gen);
      x.w2 = w2t.t().contiguous();
    }
    experts.push_back(std::move(x));
  }
  return experts;
}

}  // namespace moelab
