// A staged variant's `from` and `convert` tables in a study file:
//   from = { variant = "dense", step = 300 }      # step: optional, the last checkpoint
//   convert = { method = "dot", experts = 8, top_k = 4, calibration_steps = 100 }
#pragma once

#include <toml++/toml.h>

#include <string>

#include "study/study_spec.h"

namespace moelab {

// `from` (required) and `convert` (optional) of the [[variant]] table `t`.
VariantFrom read_variant_from(const toml::table& t, const std::string& context,
                              const std::string& file);

}  // namespace moelab
