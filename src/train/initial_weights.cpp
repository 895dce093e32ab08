#include "train/initial_weights.h"

namespace moelab {

void load_initial_weights(RunCheckpointer& checkpointer, const std::string& dir,
                          const ParallelPlan& plan, const NamedParams& buffers) {
  TensorParts weights;
  for (const auto& [name, p] : plan.parameters()) {
    weights.push_back(whole_part(name, p));
    // A model trained or imported without multi-token prediction: the MTP
    // modules keep their fresh initialisation.
    weights.back().optional = name.rfind("mtp.", 0) == 0;
  }
  for (const auto& [name, b] : buffers) {
    weights.push_back(whole_part(name, b));
    weights.back().optional = true;
  }
  checkpointer.load_weights(dir, weights);
}

}  // namespace moelab
