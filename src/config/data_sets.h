// The datasets a run trains and validates on, as the config resolves them: the
// [[data.sources]] mixture or data.dir alone (a mixture of one), and the
// [[eval.sets]] or data.val_split of the training data alone.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace moelab {

// Every source with its name filled in (the last component of its dir when the
// config gives none); data.dir with weight 1 when there are no sources.
std::vector<DataSource> training_sources(const Config& cfg);

// [[eval.sets]], or one set "val": the first source's data.val_split.
std::vector<EvalSet> validation_sets(const Config& cfg);

// Whether `name` can label a metric and a val.csv column: letters, digits, '_', '-', '.'.
bool is_plain_name(const std::string& name);

}  // namespace moelab
