#include "study/stage_plan.h"

#include "checkpoint/checkpoint_io.h"
#include "convert/dense_to_moe.h"
#include "util/error.h"

namespace moelab {
namespace {

// The experts' width: d_ff / granularity copies (upcycle) or d_ff / experts
// units each (convert), as upcycle_checkpoint and convert_checkpoint make them.
int64_t expert_width(const Config& parent, const StageConversion& c, const std::string& at) {
  const int64_t d_ff = parent.model.d_ff;
  const bool upcycle = c.method == "upcycle";
  const int64_t parts = upcycle ? c.granularity : c.experts;
  if (d_ff % parts != 0 || (upcycle && c.experts % c.granularity != 0)) {
    throw InputError(at + (upcycle ? "granularity = " + std::to_string(c.granularity) +
                                         " must divide d_ff = " + std::to_string(d_ff) +
                                         " and experts = " + std::to_string(c.experts)
                                   : "experts = " + std::to_string(c.experts) +
                                         " must divide d_ff = " + std::to_string(d_ff) +
                                         " (every expert gets d_ff / experts hidden units)"));
  }
  return d_ff / parts;
}

}  // namespace

Config converted_config(const Config& parent, const StageConversion& c,
                        const std::string& context) {
  const std::string at = c.origin + ": " + context + ".convert: ";
  if (parent.moe.enabled) {
    throw InputError(
        at + "method \"" + c.method +
        "\" makes experts of a dense model's FFNs, but the parent is already an MoE "
        "(moe.enabled = true); start from it without convert, or from a dense variant");
  }
  try {
    return moe_config_from_dense(parent, parent.moe, c.experts, c.top_k,
                                 expert_width(parent, c, at));
  } catch (const InputError& e) {
    const std::string what = e.what();
    throw InputError(what.rfind(c.origin, 0) == 0 ? what : at + what);
  }
}

int64_t start_step(const Config& parent, const VariantFrom& from, const std::string& context) {
  const int64_t last = parent.train.max_steps;
  const int64_t step = from.step > 0 ? from.step : last;
  const std::string at = from.origin + ": " + context + ".from.step = " + std::to_string(step);
  if (step > last) {
    throw InputError(at + " is beyond variant '" + from.variant +
                     "''s train.max_steps = " + std::to_string(last));
  }
  // The trainer saves every checkpoint.interval steps and at the last, and
  // keeps the checkpoint.keep newest.
  const int64_t interval = parent.checkpoint.interval;
  std::vector<int64_t> saved;
  for (int64_t s = interval; interval > 0 && s < last; s += interval) saved.push_back(s);
  saved.push_back(last);
  const size_t kept = size_t(std::max<int64_t>(parent.checkpoint.keep, 1));
  const size_t first_kept = saved.size() > kept ? saved.size() - kept : 0;
  if (std::find(saved.begin() + long(first_kept), saved.end(), step) == saved.end()) {
    throw InputError(at + ": variant '" + from.variant + "' will not keep a checkpoint there " +
                     "(checkpoint.interval = " + std::to_string(interval) +
                     ", checkpoint.keep = " + std::to_string(parent.checkpoint.keep) +
                     ", train.max_steps = " + std::to_string(last) +
                     "); set those in its config or pick a kept step");
  }
  return step;
}

void plan_start(PlannedRun& run, const VariantFrom& from, int64_t step,
                const std::string& out_root) {
  run.parent_dir = out_root + "/" + from.variant + "/seed" + std::to_string(run.seed);
  const std::string parent_checkpoint = checkpoint_dir(run.parent_dir, step);
  if (!from.convert) {
    run.cfg.train.init_from = parent_checkpoint;
    return;
  }
  const StageConversion& c = *from.convert;
  const std::string start = run.dir + "/start";
  run.cfg.train.init_from = checkpoint_dir(start, 0);
  run.start_args = {c.method == "upcycle" ? "upcycle" : "convert", parent_checkpoint};
  for (const auto& [flag, value] : c.flags)
    run.start_args.insert(run.start_args.end(), {flag, value});
  run.start_args.insert(run.start_args.end(), {"--seed", std::to_string(run.seed), "--out", start});
}

}  // namespace moelab
