// Files moelab needs at run time besides its binary: the sbatch templates in
// slurm/ and the plotting script. They live in the source tree; the binary
// finds them from $MOELAB_HOME, else by walking up from its own folder (which
// finds the checkout from build*/bin/moelab).
#pragma once

#include <string>

namespace moelab {

// Absolute path of `relative` (e.g. "slurm/study-variant.sbatch.in"); InputError
// naming every place searched if it is nowhere.
std::string find_support_file(const std::string& relative);

}  // namespace moelab
