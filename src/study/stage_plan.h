// The parts of a staged variant's plan (study_spec.h: VariantFrom): the config
// its start converts to, the parent's checkpoint it starts from, and the
// `moelab upcycle|convert` arguments that write a converted start.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "study/study_plan.h"
#include "study/study_spec.h"

namespace moelab {

// The parent's config with its dense FFNs made experts as `c` asks
// (moe_config_from_dense, the config `moelab upcycle|convert` writes);
// InputError at c.origin for a parent that is already an MoE or widths that
// do not divide. `context` names the variant in messages.
Config converted_config(const Config& parent, const StageConversion& c, const std::string& context);

// The parent step a run starts from: from.step, or the parent's last
// (train.max_steps); InputError at from.origin for a step the parent will not
// have kept (beyond max_steps, off checkpoint.interval, or older than the
// checkpoint.keep newest).
int64_t start_step(const Config& parent, const VariantFrom& from, const std::string& context);

// Sets run.parent_dir, run.cfg.train.init_from (the parent's checkpoint, or
// the converted start at <run dir>/start) and run.start_args.
void plan_start(PlannedRun& run, const VariantFrom& from, int64_t step,
                const std::string& out_root);

}  // namespace moelab
