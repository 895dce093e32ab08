// A checkpoint's model weights into a model built at any layout: train.init_from's
// start and moelab eval's checkpoint.
#pragma once

#include <string>

#include "checkpoint/run_checkpoint.h"
#include "parallel/parallel_plan.h"

namespace moelab {

// Collective: the parameters this rank holds (its experts' ranges) and the
// buffers the checkpoint holds (a converted start holds none) from `dir`.
void load_initial_weights(RunCheckpointer& checkpointer, const std::string& dir,
                          const ParallelPlan& plan, const NamedParams& buffers);

}  // namespace moelab
