// BLiMP (Warstadt et al. 2020): 67 paradigms of 1,000 minimal pairs, one JSON
// object a line (UID, sentence_good, sentence_bad). A pair is right when the
// good sentence has the higher total log-likelihood after EOS alone (as
// lm-evaluation-harness scores it: empty context, the whole sentence the
// continuation). Items interleave the paradigms, so that the first N items
// (--limit, [[eval.tasks]] limit) cover every paradigm evenly.
#pragma once

#include <string>

#include "tasks/task_text.h"

namespace moelab {

// InputError naming the file and line for a line of another shape.
TaskText read_blimp(const std::string& path);

}  // namespace moelab
