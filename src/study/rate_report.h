// An activation-rate sweep's results (issue #18's equal-resources studies):
// best validation loss per variant against its activation rate top_k /
// num_experts, with the tokens each trained and the epochs that made over the
// unique data. rate_summary.csv is what plot_study.py draws as
// activation_rate.png, the dense variants as horizontal bands.
#pragma once

#include <string>

#include "study/report.h"

namespace moelab {

// True when the study has MoE variants at two or more activation rates.
bool has_rate_sweep(const StudyReport& report);

// variant,kind,activation_rate,top_k,n,best_mean,best_std,total_params,
// active_params,flops_per_token,tokens,epochs: one row per variant, dense ones
// with rate 1 and top_k 0.
// tokens are the finished runs' mean (the plan's where none finished); epochs
// is tokens over data.max_unique_tokens, empty without a data budget.
std::string rate_summary_csv(const StudyReport& report);

// The same as a markdown section ("" without a rate sweep).
std::string rate_summary_markdown(const StudyReport& report);

}  // namespace moelab
